package providertest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/detourhq/detour/chain/providertest"
)

// A provider that fails its first two requests with 503 and then answers.
func Example() {
	srv := providertest.New(providertest.OpenAI, providertest.FailFirst(2,
		providertest.Status(http.StatusServiceUnavailable),
		providertest.OK()))
	defer srv.Close()

	body := `{"model":"gpt-test","messages":[{"role":"user","content":"hello"}]}`
	for range 3 {
		resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Println(resp.StatusCode)
			continue
		}
		fmt.Println(resp.StatusCode, out.Choices[0].Message.Content)
	}
	fmt.Println("requests:", srv.Requests())
	// Output:
	// 503
	// 503
	// 200 gpt-test answers: hello
	// requests: 3
}
