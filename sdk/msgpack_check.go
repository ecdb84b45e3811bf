package sdk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// decodeValue decodes msgpack bytes from another process (arguments, results) into out,
// after checking that every length the encoding declares fits in the bytes given. The
// decoder sizes a slice by its declared length before reading it, so five bytes claiming
// an array of 2^32 elements would otherwise allocate tens of gigabytes.
func decodeValue(b []byte, out any) error {
	if err := checkEncodedLengths(b); err != nil {
		return err
	}
	return msgpack.Unmarshal(b, out)
}

var errBadEncoding = errors.New("msgpack")

// checkEncodedLengths walks one msgpack value (with everything inside it) and fails when
// a string, binary, extension, array or map claims more than the bytes that follow: each
// element takes at least one byte.
func checkEncodedLengths(b []byte) error {
	pending := 1 // values still to read
	for pos := 0; pending > 0; pending-- {
		if pos >= len(b) {
			return fmt.Errorf("%w: %d bytes end inside a value", errBadEncoding, len(b))
		}
		tag := b[pos]
		pos++
		// fixed returns the big-endian length in the n bytes at pos.
		fixed := func(n int) (int, error) {
			if pos+n > len(b) {
				return 0, fmt.Errorf("%w: length at byte %d cut short", errBadEncoding, pos)
			}
			var v uint64
			switch n {
			case 1:
				v = uint64(b[pos])
			case 2:
				v = uint64(binary.BigEndian.Uint16(b[pos:]))
			case 4:
				v = uint64(binary.BigEndian.Uint32(b[pos:]))
			}
			pos += n
			if v > uint64(len(b)-pos) {
				return 0, fmt.Errorf("%w: byte %d claims %d elements or bytes, %d follow", errBadEncoding, pos-n-1, v, len(b)-pos)
			}
			return int(v), nil
		}
		skip := func(n int) error {
			if n > len(b)-pos {
				return fmt.Errorf("%w: byte %d claims %d bytes, %d follow", errBadEncoding, pos-1, n, len(b)-pos)
			}
			pos += n
			return nil
		}
		var err error
		var n int
		switch {
		case tag <= 0x7f || tag >= 0xe0, tag == 0xc0, tag == 0xc2, tag == 0xc3:
		case tag >= 0x80 && tag <= 0x8f:
			n = 2 * int(tag&0x0f)
		case tag >= 0x90 && tag <= 0x9f:
			n = int(tag & 0x0f)
		case tag >= 0xa0 && tag <= 0xbf:
			err = skip(int(tag & 0x1f))
		case tag == 0xc4 || tag == 0xd9: // bin8, str8
			if n, err = fixed(1); err == nil {
				err, n = skip(n), 0
			}
		case tag == 0xc5 || tag == 0xda:
			if n, err = fixed(2); err == nil {
				err, n = skip(n), 0
			}
		case tag == 0xc6 || tag == 0xdb:
			if n, err = fixed(4); err == nil {
				err, n = skip(n), 0
			}
		case tag == 0xc7 || tag == 0xc8 || tag == 0xc9: // ext8/16/32: length, type, data
			if n, err = fixed(map[byte]int{0xc7: 1, 0xc8: 2, 0xc9: 4}[tag]); err == nil {
				err, n = skip(n+1), 0
			}
		case tag == 0xca, tag == 0xce, tag == 0xd2:
			err = skip(4)
		case tag == 0xcb, tag == 0xcf, tag == 0xd3:
			err = skip(8)
		case tag == 0xcc, tag == 0xd0:
			err = skip(1)
		case tag == 0xcd, tag == 0xd1:
			err = skip(2)
		case tag >= 0xd4 && tag <= 0xd8: // fixext 1, 2, 4, 8, 16, after a type byte
			err = skip(1 + 1<<(tag-0xd4))
		case tag == 0xdc:
			n, err = fixed(2)
		case tag == 0xdd:
			n, err = fixed(4)
		case tag == 0xde:
			if n, err = fixed(2); err == nil {
				n *= 2
			}
		case tag == 0xdf:
			if n, err = fixed(4); err == nil {
				n *= 2
			}
		default: // 0xc1 is never used
			err = fmt.Errorf("%w: byte %d: 0x%02x is not a msgpack type", errBadEncoding, pos-1, tag)
		}
		if err != nil {
			return err
		}
		pending += n
		if pending-1 > len(b)-pos {
			return fmt.Errorf("%w: %d more values claimed, %d bytes follow", errBadEncoding, pending-1, len(b)-pos)
		}
	}
	return nil
}
