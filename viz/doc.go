// Package viz draws GoFlash's charts with go-echarts
// (github.com/go-echarts/go-echarts/v2) and renders them as HTML that works
// offline: Apache ECharts itself (npm echarts 5.6.0, see assets/) is embedded
// and inlined, never fetched from a CDN.
//
// Chart functions take plain Go data or flashattn values and return
// go-echarts charts, so options can be added the go-echarts way
// (SetGlobalOptions, series options):
//
//   - AttentionHeatmap, AttentionHeads: attention weights with token labels
//     (AttentionWeights and Scores compute them from q and k);
//   - Tiling: the Tr x Tc schedule of a traced CPUFlash forward pass;
//   - OnlineSoftmax: the running max, sum and rescale factor of one row
//     against the exact values (TracedRow, RowStatsOf);
//   - Memory: naive vs flash memory against N, measured (MemPoint) and by
//     formula (AttentionBytes), with a device's capacity line;
//   - Speed, Speedup, Roofline: TFLOP/s, speedup and a roofline from timed
//     runs (SpeedPoint) of any backends, including PyTorch SDPA's.
//
// Rendering: Report assembles headings, text, tables and charts into one
// self-contained HTML file with the library inlined once; Fragment and
// LibraryScript are the pieces for pages built elsewhere; package viz/nb
// shows charts in GoNB notebooks.
//
// Output is reproducible: charts have no animation, chart IDs are assigned
// in page order, and the same input renders to the same bytes. Bad input
// (NaN, ragged matrices, empty traces) is reported as an *InputError.
package viz
