//go:build linux

package simdyld

// Fixups: ordinals named, rebases and binds written into the mapped segments, and the
// choice between chained, classic and indirect fixups.

import (
	"encoding/binary"
	"fmt"
)

// library names an ordinal as dyld resolves it.
func (img *Image) library(ordinal int) (string, error) {
	switch ordinal {
	case 0:
		return "this-image", nil
	case -1:
		return "main-executable", nil
	case -2:
		return "flat-namespace", nil
	case -3:
		return "weak", nil
	}
	if ordinal >= 1 && ordinal <= len(img.dylibs) {
		return img.dylibs[ordinal-1], nil
	}
	return "", fmt.Errorf("library ordinal %d (the image links %d)", ordinal, len(img.dylibs))
}

// rebase writes target + slide at an unslid address in segment s.
func (img *Image) rebase(vmaddr uint64, s *seg, target uint64) error {
	b, err := img.word(vmaddr, s)
	if err != nil {
		return err
	}
	if err := img.count(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b, target+uint64(img.Slide))
	img.Rebases = append(img.Rebases, vmaddr+uint64(img.Slide))
	return nil
}

// bindKind says how a bind is applied.
type bindKind int

const (
	bindNow  bindKind = iota // regular: written
	bindLazy                 // lazy: written only with Options.BindLazy
	bindWeak                 // classic weak-bind table: written unless a regular bind is there
)

// bind binds an unslid address in segment s to FakeAddress(library, sym) + addend.
func (img *Image) bind(vmaddr uint64, s *seg, ordinal int, sym string, addend int64, kind bindKind, write bool, auth *AuthInfo) error {
	b, err := img.word(vmaddr, s)
	if err != nil {
		return err
	}
	lib, err := img.library(ordinal)
	if err != nil {
		return err
	}
	if sym == "" {
		return fmt.Errorf("bind at %#x without a symbol", vmaddr)
	}
	if err := img.count(); err != nil {
		return err
	}
	fake := FakeAddress(lib, sym)
	key := lib + "\x00" + sym
	if _, ok := img.Fake[key]; !ok {
		if img.fakeOf == nil {
			img.fakeOf = map[uint64]string{}
		}
		if k, dup := img.fakeOf[fake]; dup {
			return fmt.Errorf("fake addresses of %q and %q collide", k, key)
		}
		img.Fake[key], img.fakeOf[fake] = fake, key
	}
	v := uint64(int64(fake) + addend)
	addr := vmaddr + uint64(img.Slide)
	switch {
	case kind == bindWeak && img.regular[addr]:
		write = false
	case kind == bindNow && ordinal != -3:
		if img.regular == nil {
			img.regular = map[uint64]bool{}
		}
		img.regular[addr] = true
	}
	if write {
		binary.LittleEndian.PutUint64(b, v)
	}
	img.Binds = append(img.Binds, Bind{Addr: addr, Symbol: sym, Library: lib, Value: v,
		Lazy: kind == bindLazy, Weak: kind == bindWeak || ordinal == -3, Auth: auth})
	return nil
}

// fixup applies LC_DYLD_CHAINED_FIXUPS or else LC_DYLD_INFO(_ONLY); an image with neither is
// bound as Mac OS X 10.5's dyld did, from the indirect symbol table (indirect.go).
func (img *Image) fixup(fx *fixups, data []byte, opt Options) error {
	switch {
	case fx.chained != nil:
		img.stats["LC_DYLD_CHAINED_FIXUPS"]++
		return img.chained(data, fx.chained[0], fx.chained[1])
	case fx.info != nil:
		img.stats[fx.infoOnlyName]++
		return img.classic(data, fx.info, opt)
	case len(fx.ptrSecs) > 0:
		img.stats["indirect symbol table"]++
		return img.indirect(data, fx, opt)
	}
	return nil
}
