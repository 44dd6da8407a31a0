package flashattn

import "testing"

// The tile arrays as NVRTC releases write them: bytes in full (11.8),
// bytes up to the last non-zero one (12.x), words.
func TestPTXTile(t *testing.T) {
	for _, c := range []struct {
		ptx  string
		want [4]int
	}{
		{".global .align 4 .b8 goflash_tile_k[16] = {64, 0, 0, 0, 64, 0, 0, 0, 128, 0, 0, 0, 0, 192, 0, 0};", [4]int{64, 64, 128, 49152}},
		{".global .align 4 .b8 goflash_tile_k[16] = {64, 0, 0, 0, 64, 0, 0, 0, 128};", [4]int{64, 64, 128, 0}},
		{".const .align 4 .u32 goflash_tile_k[4] = {128, 64, 256, 81920};", [4]int{128, 64, 256, 81920}},
		{".global .align 4 .b8 goflash_tile_other[16] = {1};\n.global .align 4 .b32 goflash_tile_k[4] = {32, 1};", [4]int{32, 1, 0, 0}},
	} {
		got, err := ptxTile(c.ptx, "k")
		if err != nil || got != c.want {
			t.Errorf("ptxTile(%q) = %v, %v; want %v", c.ptx, got, err, c.want)
		}
	}
	for _, bad := range []string{"", ".global .align 4 .b8 goflash_tile_k[12] = {1};", ".global .align 4 .u32 goflash_tile_k[4] = {1, 2, 3, 4, 5};"} {
		if _, err := ptxTile(bad, "k"); err == nil {
			t.Errorf("ptxTile(%q) took it", bad)
		}
	}
	if err := checkTile(4, "k", [4]int{64, 64, 100, 0}); err == nil {
		t.Error("100 threads: not whole warps, taken")
	}
	if err := checkTile(4, "k", [4]int{64, 64, 128, 0}); err != nil {
		t.Error(err)
	}
}
