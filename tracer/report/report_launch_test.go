package report

import (
	"reflect"
	"testing"
)

// TestLaunchSelector: +load and +initialize (of a class or a category) are launch calls,
// instance methods and other selectors are not.
func TestLaunchSelector(t *testing.T) {
	if !reflect.DeepEqual(launchSelector("+[X load]"), 0) || launchSelector("-[X load]") != -1 || launchSelector("+[X(Cat) initialize]") != 1 || launchSelector("+[X loader]") != -1 {
		t.Errorf("launchSelector")
	}
}
