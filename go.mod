module github.com/goflash/goflash

go 1.26

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/go-echarts/go-echarts/v2 v2.7.3 // indirect
)
