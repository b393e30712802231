// Package layering holds the test that keeps Nacre's imports going down
// its tiers (layering_test.go).
package layering
