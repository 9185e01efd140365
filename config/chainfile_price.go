package config

import (
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// price reads a provider's price: a mapping with both input_per_mtok and
// output_per_mtok, each a number of at least 0. A price with a key left out
// is refused rather than taken as free, so that a forgotten key is not a
// silent zero in the cost metrics.
func (d *decoder) price(p pair, path, where string) *Price {
	v := d.resolve(p.v)
	if v == nil || isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.refuse(v, path, where, "price: must be a mapping such as {input_per_mtok: 2.5, output_per_mtok: 10} (got %s)", describe(v))
		return nil
	}
	pw := join(where, "price")
	var in, out *float64
	ok := true
	for _, q := range d.pairs(v, pw) {
		kp := child(path, q.key)
		d.lines[kp] = q.k.Line
		switch q.key {
		case "input_per_mtok":
			in = d.perMTok(q, kp, pw)
			ok = ok && in != nil
		case "output_per_mtok":
			out = d.perMTok(q, kp, pw)
			ok = ok && out != nil
		default:
			d.unknown(q, path, pw, "a price", priceKeys)
			ok = false
		}
	}
	for _, k := range []struct {
		key string
		v   *float64
	}{{"input_per_mtok", in}, {"output_per_mtok", out}} {
		if k.v == nil && !d.refused[child(path, k.key)] && !d.meant[child(path, k.key)] {
			d.add(v.Line, child(path, k.key), join(pw, k.key+": required (0 for free)"))
			ok = false
		}
	}
	if !ok {
		d.refused[path] = true
		return nil
	}
	return &Price{InputPerMTok: *in, OutputPerMTok: *out}
}

// MaxPricePerMTok bounds a price per million tokens: far above any
// provider's, and low enough that a cost stays finite for any usage.
const MaxPricePerMTok = 1e6

// perMTok reads a price per million tokens: a number from 0 to
// MaxPricePerMTok.
func (d *decoder) perMTok(p pair, path, where string) *float64 {
	v := d.resolve(p.v)
	if v == nil || isNull(v) {
		return nil
	}
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float") {
		f, err := strconv.ParseFloat(v.Value, 64)
		switch {
		case err != nil || math.IsInf(f, 0) || math.IsNaN(f):
		case f < 0:
			d.refuse(v, path, where, "%s: must not be negative (got %s)", p.key, v.Value)
			return nil
		case f > MaxPricePerMTok:
			d.refuse(v, path, where, "%s: must be at most %g (got %s)", p.key, float64(MaxPricePerMTok), v.Value)
			return nil
		default:
			return &f
		}
	}
	d.refuse(v, path, where, "%s: must be a number such as 2.5 (got %s)", p.key, describe(v))
	return nil
}
