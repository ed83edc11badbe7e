package tablelayout

import "testing"

func TestLogDeniedValidate(t *testing.T) {
	if err := DefaultLogDenied().Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
	for _, l := range []LogDenied{{Group: 1, Rate: 0, Burst: 1}, {Group: 1, Rate: 1, Burst: 0}} {
		if l.Validate() == nil {
			t.Errorf("%+v is valid", l)
		}
	}
}
