package stream

import (
	"errors"
	"fmt"
)

// problems collects what is wrong with a configuration, each naming its
// field: "stream: ProcessorConfig.AckWait must be positive".
type problems []error

func (p *problems) add(field, what string) {
	*p = append(*p, fmt.Errorf("stream: %s %s", field, what))
}

func (p problems) err() error { return errors.Join(p...) }

func positive[T ~int | ~int64](p *problems, field string, v T) {
	if v <= 0 {
		p.add(field, "must be positive")
	}
}
