package main

// descriptorLimit: Windows has no per-process soft limit of handles to
// lower --max-connections to (the kernel's cap is 2^24 per process), so
// the flag stands as given.
func descriptorLimit() (uint64, bool) { return 0, false }
