package stage

import "testing"

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"6.15", true},
		{"6.15.0", true},
		{"6.18.44-fc-v657", true},
		{"7.0.1", true},
		{"6.14.11-300.fc42.x86_64", false},
		{"6.1.0-31-amd64", false},
		{"5.19", false},
		{"6.150", true},
		{"6", false},
		{"", false},
		{"six.fifteen", false},
		{"6.x", false},
		{"-6.15", false},
	} {
		if got := kernelAtLeast(tc.release, 6, 15); got != tc.want {
			t.Errorf("kernelAtLeast(%q, 6, 15) = %v, want %v", tc.release, got, tc.want)
		}
	}
}

func FuzzKernelAtLeast(f *testing.F) {
	f.Add("6.18.44-fc-v657")
	f.Fuzz(func(t *testing.T, release string) {
		// Never panics; a release it accepts for 6.15 it accepts for 6.14.
		if kernelAtLeast(release, 6, 15) && !kernelAtLeast(release, 6, 14) {
			t.Fatalf("%q is 6.15 or later but not 6.14 or later", release)
		}
	})
}
