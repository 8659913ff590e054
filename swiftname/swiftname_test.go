package swiftname

import (
	"strings"
	"testing"
)

// The expectations are written by hand from the grammars (docs/ABI/OldMangling.rst and
// Mangling.rst); no Swift demangler runs on Linux here (llvm-cxxfilt passes Swift names through).
var cases = []struct{ in, want string }{
	// compiler-emitted class names, as in the corpus
	{"_TtC11ApertureCLI20ApertureNotification", "ApertureCLI.ApertureNotification"},
	{"_TtCs12_SwiftObject", "Swift._SwiftObject"},
	{"_TtCSs12_SwiftObject", "Swift._SwiftObject"},
	{"_TtCV7DSStore7DSStoreP33_81859975D46C1BDFDC2AA01284D3574024DiagnosticHandlerStorage", "DSStore.DSStore.(DiagnosticHandlerStorage in _81859975)"},
	{"_TtCCV7DSStore7DSStoreP33_81859975D46C1BDFDC2AA01284D3574024DiagnosticHandlerStorage26ThreadDiagnosticHandlerBox", "DSStore.DSStore.(DiagnosticHandlerStorage in _81859975).ThreadDiagnosticHandlerBox"},
	{"_TtC13SwiftLintCoreP33_C50808BC48225F2DD91FDECC9BB249EE5Cache", "SwiftLintCore.(Cache in _C50808BC)"},
	{"_TtCC4main5Outer5Inner", "main.Outer.Inner"},
	{"_TtCO4main4Kind3Box", "main.Kind.Box"},
	{"_TtCC4main3FooL_3Bar", "main.Foo.(Bar #1)"},
	{"_TtCC4main3FooL0_3Bar", "main.Foo.(Bar #2)"},
	{"_TtCSo8NSObject", "__C.NSObject"},
	// local classes: in a function (the corpus's SwiftLint has both)
	{"_TtCFV14SwiftOperators13OperatorTable13addSourceFileFzTV11SwiftSyntax16SourceFileSyntax12errorHandlerFzOS_13OperatorErrorT__T_L_23OperatorAndGroupVisitor", "SwiftOperators.OperatorTable.addSourceFile(_:errorHandler:).(OperatorAndGroupVisitor #1)"},
	{"_TtCFV21SwiftLintBuiltInRules26RedundantObjcAttributeRule11makeVisitorFT4fileC13SwiftLintCore13SwiftLintFile_GCS1_23ViolationsSyntaxVisitorGVS1_21SeverityConfigurationS0___L_7Visitor", "SwiftLintBuiltInRules.RedundantObjcAttributeRule.makeVisitor(file:).(Visitor #1)"},
	{"_TtCF4main4mainFT_T_L_3Foo", "main.main().(Foo #1)"},
	{"_TtCF4main1fFSiT_L0_3Foo", "main.f(_:).(Foo #2)"},
	{"_TtCZF4main1S1fFT_T_L_3Foo", ""},
	{"_TtC4mainX7caf_dma", "main.café"},
	{"_TtGV4main3Foo_", "main.Foo"},
	{"_TtCSi3Foo", "Swift.Int.Foo"},
	// protocols: a protocol list of one
	{"_TtP4Shop8Delegate_", "Shop.Delegate"},
	{"_TtPs5Error_", "Swift.Error"},
	{"_TtP4Shop8DelegateS_4Sink_", "Shop.Delegate & Shop.Sink"},
	{"_TtP_", "Any"},
	// generic class instances, named by the runtime
	{"_TtGC7SwiftUI29PresentationHostingControllerVS_7AnyView_", "SwiftUI.PresentationHostingController<SwiftUI.AnyView>"},
	{"_TtGC4main3FooSi_", "main.Foo<Swift.Int>"},
	{"_TtGC4main3FooSiSS_", "main.Foo<Swift.Int, Swift.String>"},
	{"_TtGC4main3FooGSaSS__", "main.Foo<Swift.Array<Swift.String>>"},
	{"_TtGC4main3FooGSqSi__", "main.Foo<Swift.Optional<Swift.Int>>"},
	{"_TtGC4main3FooCS_3Bar_", "main.Foo<main.Bar>"},
	{"_TtGC4main3FooS0__", "main.Foo<main.Foo>"},
	{"_TtGC4main3FooCS0_3Bar_", "main.Foo<main.Foo.Bar>"},
	{"_TtGCC4main5Outer5Inner_Si_", "main.Outer.Inner<Swift.Int>"},
	{"_TtGCC4main5Outer5InnerSi_SS_", "main.Outer<Swift.Int>.Inner<Swift.String>"},
	{"_TtGC4main3FooT__", "main.Foo<()>"},
	{"_TtGC4main3FooTSiSS__", "main.Foo<(Swift.Int, Swift.String)>"},
	{"_TtGC4main3FooT1aSi1bSS__", "main.Foo<(a: Swift.Int, b: Swift.String)>"},
	{"_TtGC4main3FooFSiSS_", "main.Foo<(Swift.Int) -> Swift.String>"},
	{"_TtGC4main3FooFzT_T__", "main.Foo<() throws -> ()>"},
	{"_TtGC4main3FooMSi_", "main.Foo<Swift.Int.Type>"},
	{"_TtGC4main3FooPMPS_1P__", "main.Foo<main.P.Type>"},
	{"_TtGC4main3FooP__", "main.Foo<Any>"},
	{"_TtGC4main3FooPS_1P__", "main.Foo<main.P>"},
	{"_TtGC4main3FooPs5Error__", "main.Foo<Swift.Error>"},
	{"_TtGC4main3FooSdSfSbSuSVSvSPSpSRSrSc_", "main.Foo<Swift.Double, Swift.Float, Swift.Bool, Swift.UInt, Swift.UnsafeRawPointer, Swift.UnsafeMutableRawPointer, Swift.UnsafePointer, Swift.UnsafeMutablePointer, Swift.UnsafeBufferPointer, Swift.UnsafeMutableBufferPointer, Swift.UnicodeScalar>"},
	{"_TtGC4main3FooBo_", "main.Foo<Builtin.NativeObject>"},
	{"_TtGC4main3FooBi64__", "main.Foo<Builtin.Int64>"},
	{"_TtGC4main3FooCSo8NSObject_", "main.Foo<__C.NSObject>"},
	// the stable mangling, when the runtime cannot use the old one
	{"$s4main3FooCD", "main.Foo"},
	{"$s4main3FooC", "main.Foo"},
	{"_$s4main3FooCD", "main.Foo"},
	{"$s4main3FooC3BarCD", "main.Foo.Bar"},
	{"$s7SwiftUI19UIHostingControllerCyAA7AnyViewVGD", "SwiftUI.UIHostingController<SwiftUI.AnyView>"},
	{"$s4main3FooCySiGD", "main.Foo<Swift.Int>"},
	{"$s4main3FooCySSSgGD", "main.Foo<Swift.Optional<Swift.String>>"},
	{"$s4main3FooCySi_GD", ""}, // a marker without a level to go to
	{"$s4main5OuterC5InnerCySi_SSGD", "main.Outer<Swift.Int>.Inner<Swift.String>"},
	{"$s4main3FooCyAA3BarCGD", "main.Foo<main.Bar>"},
	{"$s4main3FooCyAcA3BarCGD", "main.Foo<main.Foo, main.Bar>"},
	{"$s4main3Foo33_81859975D46C1BDFDC2AA01284D35740LLCD", "main.(Foo in _81859975)"},
	{"$s13SwiftLintCore0b4Rule0CD", "SwiftLintCore.LintRule"},
	// the corpus's symbols: ApertureCLI.ApertureNotification's metadata, a superclass reference
	{"$s11ApertureCLI0A12NotificationCN", ""},
	{"$s11ApertureCLI0A12NotificationC", "ApertureCLI.ApertureNotification"},
	{"_$sSo8NSObjectC", "__C.NSObject"},
	{"$s13SwiftLintCore0a4Rule0CD", "SwiftLintCore.SwiftRule"},
	{"$s4main1PPD", "main.P"},
	{"$sSo8NSObjectCD", "__C.NSObject"},
	{"$s4main3FooCyS2iGD", "main.Foo<Swift.Int, Swift.Int>"},
}

var unchanged = []string{
	"", "NSObject", "_TtC", "_Tt", "_TtC4main", "_TtC4main3Fo", "_TtC99main3Foo", "_TtC4main3Foox",
	"_TtGC4main3FooSi", "_TtGC4main3Foo", "_TtS0_", "_TtGC4main3FooS9__", "_TtC4main0", "_TtCS_3Foo",
	"_TtC4mainX4$$$$", "_TtP4Shop8Delegate", "_TtPS_", "_TtGP4main3FooSi_",
	"$s", "$sX", "$s4main3FooCMn", "$s4main3Foo", "$s4mainC", "$s0aC", "$sA", "$sAA", "$s3FooCD",
	"$s4mainSi3FooCD", "_TtC4main3FooP", "_TtCP4main1P3Foo",
}

func TestDemangle(t *testing.T) {
	for _, c := range cases {
		got, ok := Parse(c.in)
		if c.want == "" {
			if ok {
				t.Errorf("Parse(%q) = %q, want failure", c.in, got)
			}
			continue
		}
		if !ok || got != c.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, s := range unchanged {
		if got := Demangle(s); got != s {
			t.Errorf("Demangle(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestMethod(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"-[_TtC11ApertureCLI4Once run]", "-[ApertureCLI.Once run]"},
		{"+[_TtCs12_SwiftObject load]", "+[Swift._SwiftObject load]"},
		{"-[_TtGC4main3FooSi_ a:b:]", "-[main.Foo<Swift.Int> a:b:]"},
		{"-[NSObject init]", "-[NSObject init]"},
		{"-[_TtCbroken init]", "-[_TtCbroken init]"},
		{"-[_TtC4main3Foo]", "-[_TtC4main3Foo]"},
		{"[mark 3]", "[mark 3]"},
		{"", ""},
	} {
		if got := Method(c.in); got != c.want {
			t.Errorf("Method(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNoAllocation: a name that is not Swift's costs no allocation.
func TestNoAllocation(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		Method("-[NSObject init]")
		Demangle("NSObject")
	})
	if n != 0 {
		t.Fatalf("%v allocations for names that are not Swift's", n)
	}
}

func TestPunycode(t *testing.T) {
	for in, want := range map[string]string{"caf_dma": "café", "and_GmaCc": "ñandú", "eCIh": "😀", "Gre_GkaIi": "Größe"} {
		if got, ok := decodePunycode(in); !ok || got != want {
			t.Errorf("decodePunycode(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"caf_d", "_!", "caf_ä", "zzzzzzzzzzzzzzzzzzzzzzzzzzzz"} {
		if got, ok := decodePunycode(in); ok {
			t.Errorf("decodePunycode(%q) = %q, want failure", in, got)
		}
	}
}

// FuzzDemangle: any input returns without a panic, a name that does not parse comes back
// unchanged, and a parsed one is never empty and has no control bytes.
func FuzzDemangle(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in)
	}
	for _, s := range unchanged {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := Parse(s)
		if !ok {
			if Demangle(s) != s {
				t.Fatalf("Demangle(%q) changed a name Parse refused", s)
			}
			return
		}
		if got == "" {
			t.Fatalf("Parse(%q) is empty", s)
		}
		if !IsMangled(s) {
			t.Fatalf("Parse(%q) read a name IsMangled refuses", s)
		}
		_ = Method("-[" + s + " x]")
		if strings.ContainsAny(got, "\x00\n") && !strings.ContainsAny(s, "\x00\n") {
			t.Fatalf("Parse(%q) = %q made control bytes", s, got)
		}
	})
}
