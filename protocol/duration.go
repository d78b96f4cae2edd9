package protocol

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Duration is a time.Duration that encodes as a Go duration string ("90s")
// and also decodes from a number of seconds, for clients without one.
type Duration time.Duration

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts "90s" or 90 (seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return d.set(v)
}

// EncodeMsgpack encodes d as a duration string.
func (d Duration) EncodeMsgpack(enc *msgpack.Encoder) error {
	return enc.EncodeString(time.Duration(d).String())
}

// DecodeMsgpack accepts a duration string or a number of seconds.
func (d *Duration) DecodeMsgpack(dec *msgpack.Decoder) error {
	v, err := dec.DecodeInterface()
	if err != nil {
		return err
	}
	return d.set(v)
}

func (d *Duration) set(v any) error {
	switch x := v.(type) {
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("duration %q: %w", x, err)
		}
		*d = Duration(p)
	case float64, float32, int64, int32, int16, int8, uint64, uint32, uint16, uint8:
		// Through secondsToDuration, so a huge number is refused rather
		// than wrapped around into some other duration.
		p, err := secondsToDuration(reflect.ValueOf(x).Convert(reflect.TypeFor[float64]()).Float())
		if err != nil {
			return err
		}
		*d = p
	default:
		return fmt.Errorf("duration must be a string like \"90s\" or a number of seconds, not %T", v)
	}
	if *d < 0 {
		return fmt.Errorf("duration must not be negative")
	}
	return nil
}
