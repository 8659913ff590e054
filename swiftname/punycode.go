package swiftname

import "unicode/utf8"

// decodePunycode decodes Swift's punycode (RFC 3492 with '_' as the delimiter and the digits
// a-z for 0-25, A-J for 26-35) into UTF-8; false for malformed input or a code point that is
// not a valid scalar.
func decodePunycode(s string) (string, bool) {
	const (
		base, tmin, tmax, skew, damp = 36, 1, 26, 38, 700
		initialBias, initialN        = 72, 128
	)
	var out []rune
	if d := lastIndexByte(s, '_'); d >= 0 {
		for i := 0; i < d; i++ {
			if s[i] >= 0x80 {
				return "", false
			}
			out = append(out, rune(s[i]))
		}
		s = s[d+1:]
	}
	n, bias, i := initialN, initialBias, 0
	for len(s) > 0 {
		oldi, w := i, 1
		for k := base; ; k += base {
			if len(s) == 0 {
				return "", false
			}
			c := s[0]
			s = s[1:]
			var digit int
			switch {
			case c >= 'a' && c <= 'z':
				digit = int(c - 'a')
			case c >= 'A' && c <= 'J':
				digit = int(c-'A') + 26
			default:
				return "", false
			}
			if digit > (1<<31-1-i)/w {
				return "", false
			}
			i += digit * w
			t := k - bias
			if t < tmin {
				t = tmin
			} else if t > tmax {
				t = tmax
			}
			if digit < t {
				break
			}
			if w > (1<<31-1)/(base-t) {
				return "", false
			}
			w *= base - t
		}
		// adapt
		delta := i - oldi
		if oldi == 0 {
			delta /= damp
		} else {
			delta /= 2
		}
		delta += delta / (len(out) + 1)
		k := 0
		for delta > ((base-tmin)*tmax)/2 {
			delta /= base - tmin
			k += base
		}
		bias = k + (base-tmin+1)*delta/(delta+skew)
		if i/(len(out)+1) > 0x10ffff-n {
			return "", false
		}
		n += i / (len(out) + 1)
		i %= len(out) + 1
		if n > 0x10ffff || n >= 0xd800 && n <= 0xdfff {
			return "", false
		}
		out = append(out, 0)
		copy(out[i+1:], out[i:])
		out[i] = rune(n)
		i++
		if len(out) > 4096 {
			return "", false
		}
	}
	b := make([]byte, 0, len(out))
	for _, r := range out {
		if !utf8.ValidRune(r) {
			return "", false
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b), true
}

func lastIndexByte(s string, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}
