package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// parsePlist reads an XML property list into Go values: dict -> map[string]any, array -> []any,
// string, integer, real and date -> string (as written), true/false -> bool, data -> string.
// Enough for the Info.plist files cross.sh writes; a binary plist is an error.
func parsePlist(src []byte) (any, error) {
	if bytes.HasPrefix(src, []byte("bplist")) {
		return nil, errors.New("binary property list: want XML")
	}
	d := xml.NewDecoder(bytes.NewReader(src))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("no <plist> element: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "plist" {
				return nil, fmt.Errorf("root element <%s>, want <plist>", se.Name.Local)
			}
			v, end, err := plistValue(d)
			if err != nil {
				return nil, err
			}
			if end {
				return nil, errors.New("empty <plist>")
			}
			return v, nil
		}
	}
}

// plistValue reads the next value element; end reports the enclosing element's end instead.
func plistValue(d *xml.Decoder) (v any, end bool, err error) {
	for {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil, true, nil
		case xml.StartElement:
			switch t.Name.Local {
			case "dict":
				m := map[string]any{}
				for {
					k, end, err := plistValue(d)
					if err != nil {
						return nil, false, err
					}
					if end {
						return m, false, nil
					}
					ks, ok := k.(plistKey)
					if !ok {
						return nil, false, fmt.Errorf("dict: %v where a <key> belongs", k)
					}
					val, end, err := plistValue(d)
					if err != nil {
						return nil, false, err
					}
					if end {
						return nil, false, fmt.Errorf("dict: key %q has no value", ks)
					}
					if _, dup := m[string(ks)]; dup {
						return nil, false, fmt.Errorf("dict: key %q twice", ks)
					}
					m[string(ks)] = val
				}
			case "array":
				var a []any
				for {
					val, end, err := plistValue(d)
					if err != nil {
						return nil, false, err
					}
					if end {
						return a, false, nil
					}
					a = append(a, val)
				}
			case "true", "false":
				if err := d.Skip(); err != nil {
					return nil, false, err
				}
				return t.Name.Local == "true", false, nil
			case "key", "string", "integer", "real", "date", "data":
				var s string
				if err := d.DecodeElement(&s, &t); err != nil {
					return nil, false, err
				}
				if t.Name.Local == "key" {
					return plistKey(s), false, nil
				}
				return strings.TrimSpace(s), false, nil
			default:
				return nil, false, fmt.Errorf("unknown element <%s>", t.Name.Local)
			}
		}
	}
}

// plistKey is a dict key, told apart from a string value.
type plistKey string

// plistStrings returns v as a list of strings (an array of strings), or nil.
func plistStrings(v any) []string {
	a, _ := v.([]any)
	var out []string
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
