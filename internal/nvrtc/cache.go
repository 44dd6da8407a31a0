package nvrtc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// CacheEnv names the environment variable that sets the on-disk cache's
// directory ("off": memory only). Unset, DefaultCacheDir is
// os.UserCacheDir()/goflash/nvrtc.
const CacheEnv = "GOFLASH_NVRTC_CACHE"

// cacheFormat changes when what a key covers or an entry holds changes.
const cacheFormat = "goflash-nvrtc-cache-1"

// DefaultCacheDir is CacheEnv's directory, or os.UserCacheDir()/goflash/nvrtc;
// "" (memory only) when CacheEnv is "off" or there is no user cache
// directory.
func DefaultCacheDir() string {
	switch v := os.Getenv(CacheEnv); v {
	case "off", "0", "none":
		return ""
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "goflash", "nvrtc")
	default:
		return v
	}
}

// Cache keeps compiled PTX by Key: in memory, and in Dir when it is not "".
// It is safe for concurrent use.
type Cache struct {
	Dir string

	mu       sync.Mutex
	mem      map[string]*Output
	compiles atomic.Int64
	hits     atomic.Int64
}

// NewCache returns an empty cache that also keeps its entries in dir ("":
// memory only).
func NewCache(dir string) *Cache { return &Cache{Dir: dir, mem: map[string]*Output{}} }

// Compiles is how many times the cache called NVRTC (its misses).
func (c *Cache) Compiles() int { return int(c.compiles.Load()) }

// Hits is how many compiles the cache answered without NVRTC.
func (c *Cache) Hits() int { return int(c.hits.Load()) }

// Key is the hex SHA-256 of everything the PTX depends on: the library's
// version, the architecture, the program's name, source, headers (by name)
// and options.
func Key(l *Library, p Program, arch int) string {
	h := sha256.New()
	put := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put(cacheFormat)
	if l != nil {
		put(l.VersionString())
	}
	put(ArchOption(arch))
	put(p.Name)
	put(p.Source)
	hs := append([]Header(nil), p.Headers...)
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].Name < hs[j].Name })
	for _, hd := range hs {
		put(hd.Name)
		put(hd.Source)
	}
	for _, o := range p.Options {
		put(o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CompilePTX is l.CompilePTX through the cache: cached says the PTX came
// from it (memory or disk) and NVRTC did not run. Failed compiles are not
// kept. An entry read from disk has no log.
func (c *Cache) CompilePTX(l *Library, p Program, arch int) (out *Output, cached bool, err error) {
	if l == nil {
		o, err := l.CompilePTX(p, arch) // the no-library error
		return o, false, err
	}
	key := Key(l, p, arch)
	c.mu.Lock()
	if c.mem == nil {
		c.mem = map[string]*Output{}
	}
	o := c.mem[key]
	c.mu.Unlock()
	if o == nil {
		o = c.read(key, arch)
	}
	if o != nil {
		c.hits.Add(1)
		c.put(key, o, false)
		return o, true, nil
	}
	c.compiles.Add(1)
	o, err = l.CompilePTX(p, arch)
	if err != nil {
		return nil, false, err
	}
	c.put(key, o, true)
	return o, false, nil
}

func (c *Cache) put(key string, o *Output, disk bool) {
	c.mu.Lock()
	c.mem[key] = o
	c.mu.Unlock()
	if disk && c.Dir != "" {
		c.write(key, o.PTX) // a cache that cannot be written is a cache of memory alone
	}
}

func (c *Cache) path(key string) string { return filepath.Join(c.Dir, key+".ptx") }

// read returns the disk entry of key, nil when there is none or it is not
// PTX (a torn or foreign file is compiled again).
func (c *Cache) read(key string, arch int) *Output {
	if c.Dir == "" {
		return nil
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil || !bytes.Contains(b, []byte(".version")) || !bytes.HasSuffix(b, []byte{0}) {
		return nil
	}
	return &Output{PTX: b, Arch: arch}
}

// write stores ptx under key through a temporary file and a rename, so a
// reader sees a whole entry or none.
func (c *Cache) write(key string, ptx []byte) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(c.Dir, "tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(ptx)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), c.path(key)) != nil {
		_ = os.Remove(f.Name())
	}
}

// Entries lists the keys on disk (for tests and cache tools).
func (c *Cache) Entries() []string {
	if c.Dir == "" {
		return nil
	}
	es, _ := os.ReadDir(c.Dir)
	var out []string
	for _, e := range es {
		if n, ok := strings.CutSuffix(e.Name(), ".ptx"); ok {
			out = append(out, n)
		}
	}
	return out
}
