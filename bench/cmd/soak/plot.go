package main

import (
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotSamples draws four panels over time (minutes): RSS, goroutines,
// open fds — origin and relay — and the origin's apply-to-send p99.
func plotSamples(path string, ss []sample) error {
	panels := []struct {
		title, unit string
		lines       map[string]func(sample) float64
	}{
		{"RSS", "MiB", map[string]func(sample) float64{"origin": func(s sample) float64 { return s.rss[0] }, "relay": func(s sample) float64 { return s.rss[1] }}},
		{"goroutines", "count", map[string]func(sample) float64{"origin": func(s sample) float64 { return s.goroutines[0] }, "relay": func(s sample) float64 { return s.goroutines[1] }}},
		{"open fds", "count", map[string]func(sample) float64{"origin": func(s sample) float64 { return s.fds[0] }, "relay": func(s sample) float64 { return s.fds[1] }}},
		{"apply-to-send p99 (origin)", "ms", map[string]func(sample) float64{"p99": func(s sample) float64 { return s.p99 }}},
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "minutes"
		p.Y.Label.Text = pn.unit
		p.Y.Min = 0
		var args []any
		for _, name := range []string{"origin", "relay", "p99"} {
			get, ok := pn.lines[name]
			if !ok {
				continue
			}
			var pts plotter.XYs
			for _, s := range ss {
				v := get(s)
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				pts = append(pts, plotter.XY{X: s.at.Minutes(), Y: v})
			}
			args = append(args, name, pts)
		}
		if err := plotutil.AddLines(p, args...); err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	const w, h = 24 * vg.Centimeter, 30 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Centimeter / 2, PadX: vg.Centimeter / 2, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	png := vgimg.PngCanvas{Canvas: img}
	f, err := createFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = png.WriteTo(f)
	return err
}

func createFile(path string) (*os.File, error) { return os.Create(path) }
