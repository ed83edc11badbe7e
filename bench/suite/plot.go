package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ranged is a series of medians with their min–max, for error bars.
type ranged struct {
	xs []float64
	ss []sample
	k  float64 // unit factor, e.g. 1000 for ms
}

func (r ranged) Len() int                { return len(r.xs) }
func (r ranged) XY(i int) (x, y float64) { return r.xs[i], r.ss[i].median() * r.k }
func (r ranged) YError(i int) (lo, hi float64) {
	m := r.ss[i].median()
	return (m - r.ss[i].min()) * r.k, (r.ss[i].max() - m) * r.k
}

// addSeries draws one named series: line, points and min–max bars.
func addSeries(p *plot.Plot, i int, name string, r ranged) error {
	line, points, err := plotter.NewLinePoints(r)
	if err != nil {
		return fmt.Errorf("series %s: %w", name, err)
	}
	c := plotutil.Color(i)
	line.Color, points.Color = c, c
	points.Shape = plotutil.Shape(i)
	bars, err := plotter.NewYErrorBars(r)
	if err != nil {
		return fmt.Errorf("series %s: %w", name, err)
	}
	bars.Color = c
	p.Add(line, points, bars)
	p.Legend.Add(name, line, points)
	return nil
}

func newPlot(title, x, y string, logX, logY bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

func save(p *plot.Plot, dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return "", fmt.Errorf("save plot %s: %w", name, err)
	}
	return name, nil
}

// plotScale: scenario 1, full-program time vs cluster size.
func plotScale(dir string, rs []scaleResult) (string, error) {
	p := newPlot("Full program: nftguard apply vs nft -f of the rendered table", "pods in the cluster (policies = pods/10)", "time (ms, log)", true, true)
	var xs []float64
	var apply, nft []sample
	for _, r := range rs {
		xs = append(xs, float64(r.Size.Pods))
		apply, nft = append(apply, r.Apply), append(nft, r.NftF)
	}
	if err := addSeries(p, 0, "nftguard apply (parse+compile+program)", ranged{xs, apply, 1000}); err != nil {
		return "", err
	}
	if err := addSeries(p, 1, "nft -f of nftguard render", ranged{xs, nft, 1000}); err != nil {
		return "", err
	}
	return save(p, dir, "scale.png")
}

// plotChange: scenario 2, per-change latency vs cluster size.
func plotChange(dir string, rs []changeResult) (string, error) {
	p := newPlot("One change: engine vs nft -f rewrite vs iptables save|edit|restore", "pods in the cluster (policies = pods/10)", "latency (ms, log)", true, true)
	type series struct {
		xs []float64
		ss []sample
	}
	engine := map[string]*series{}
	var order []string
	var nft, cycle, syncOnly series
	for _, r := range rs {
		s, ok := engine[r.Change]
		if !ok {
			s = &series{}
			engine[r.Change] = s
			order = append(order, r.Change)
		}
		s.xs, s.ss = append(s.xs, float64(r.Size.Pods)), append(s.ss, r.Engine)
		if r.Change == "pod added" {
			syncOnly.xs, syncOnly.ss = append(syncOnly.xs, float64(r.Size.Pods)), append(syncOnly.ss, r.Sync)
			nft.xs, nft.ss = append(nft.xs, float64(r.Size.Pods)), append(nft.ss, r.NftF)
			cycle.xs, cycle.ss = append(cycle.xs, float64(r.Size.Pods)), append(cycle.ss, r.Cycle)
		}
	}
	for i, name := range order {
		if err := addSeries(p, i, "engine: "+name, ranged{engine[name].xs, engine[name].ss, 1000}); err != nil {
			return "", err
		}
	}
	if err := addSeries(p, len(order)+2, "engine.Sync alone, without compiling (pod added)", ranged{syncOnly.xs, syncOnly.ss, 1000}); err != nil {
		return "", err
	}
	if err := addSeries(p, len(order), "nft -f rewrite (pod added)", ranged{nft.xs, nft.ss, 1000}); err != nil {
		return "", err
	}
	if err := addSeries(p, len(order)+1, "iptables-nft save|edit|restore (pod added)", ranged{cycle.xs, cycle.ss, 1000}); err != nil {
		return "", err
	}
	return save(p, dir, "change.png")
}

// plotDataPath: scenario 3, rates vs policies, the no-firewall limit
// first.
func plotDataPath(dir string, rs []dpResult) (string, error) {
	p := newPlot("Data path through one node: rate vs policies selecting other pods", "", "operations per second", false, false)
	var labels []string
	var xs []float64
	var tcp, udp []sample
	for i, r := range rs {
		labels = append(labels, r.Config.String())
		xs = append(xs, float64(i))
		tcp, udp = append(tcp, r.TCPConn), append(udp, r.UDPRR)
	}
	p.NominalX(labels...)
	p.Y.Min = 0
	if err := addSeries(p, 0, "new TCP connections/s", ranged{xs, tcp, 1}); err != nil {
		return "", err
	}
	if err := addSeries(p, 1, "UDP request/response/s", ranged{xs, udp, 1}); err != nil {
		return "", err
	}
	p.Legend.Left = false
	p.Legend.Top = false
	return save(p, dir, "datapath.png")
}

// plotDomains: scenario 9, p50 and p99 of new TCP connections and of UDP
// round trips against the number of destination addresses, for the
// domain rule, the networks rules, one interval set and no firewall: four
// panels in one PNG.
func plotDomains(dir string, d domainsResult) (string, error) {
	kinds := []domKind{domDomain, domNetworks, domOneSet, domNone}
	names := map[domKind]string{domDomain: "domainNames (timeout set)", domNetworks: "networks rules (≤ 625 /32s a rule)",
		domOneSet: "networks, one interval set", domNone: "no firewall"}
	panel := func(title string, pick func(domDP) sample) (*plot.Plot, error) {
		p := newPlot(title, "destination addresses of the pod (N)", "µs", true, false)
		p.Y.Min = 0
		p.Legend.Top = false
		for i, k := range kinds {
			var xs []float64
			var ss []sample
			for _, n := range d.Spec.Addrs {
				if x, ok := d.find(k, n); ok && len(pick(x)) > 0 {
					xs, ss = append(xs, float64(n)), append(ss, pick(x))
				}
			}
			if len(xs) == 0 {
				continue
			}
			if err := addSeries(p, i, names[k], ranged{xs, ss, 1e6}); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	var rows [][]*plot.Plot
	for _, proto := range []struct {
		name string
		lat  func(domDP) latency
	}{{"new TCP connection", func(x domDP) latency { return x.TCP }}, {"UDP round trip, new flow", func(x domDP) latency { return x.UDP }}} {
		var row []*plot.Plot
		for _, q := range []struct {
			name string
			f    func(latency) sample
		}{{"p50", func(l latency) sample { return l.P50 }}, {"p99", func(l latency) sample { return l.P99 }}} {
			p, err := panel(proto.name+", "+q.name+" (median of repetitions, min–max)", func(x domDP) sample { return q.f(proto.lat(x)) })
			if err != nil {
				return "", err
			}
			row = append(row, p)
		}
		rows = append(rows, row)
	}
	img := vgimg.New(12*vg.Inch, 8*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align(rows, tiles, dc)
	for j := range rows {
		for i := range rows[j] {
			rows[j][i].Draw(canvases[j][i])
		}
	}
	return savePNG(img, dir, "domains-datapath.png")
}

// plotDomainsFwd: scenario 9's forwarder, latency percentiles through the
// forwarder and direct, one panel per transport.
func plotDomainsFwd(dir string, f *domFwd) (string, error) {
	labels := make([]string, len(fwdPcts))
	xs := make([]float64, len(fwdPcts))
	for i, p := range fwdPcts {
		labels[i], xs[i] = fmt.Sprintf("p%g", p*100), float64(i)
	}
	var row []*plot.Plot
	for _, transport := range []string{"udp", "tcp"} {
		p := newPlot("DNS over "+strings.ToUpper(transport)+", a new socket a query", "percentile of the queries", "µs (log)", false, true)
		p.NominalX(labels...)
		i := 0
		for _, l := range f.Lat {
			if l.Transport != transport {
				continue
			}
			for _, s := range []struct {
				name string
				v    []float64
			}{{"through the forwarder", l.Fwd}, {"direct", l.Direct}} {
				ss := make([]sample, len(s.v))
				for k, v := range s.v {
					ss[k] = sample{v}
				}
				if err := addSeries(p, i, fmt.Sprintf("%s, %d address%s", s.name, l.Addrs, plural(l.Addrs)), ranged{xs, ss, 1e6}); err != nil {
					return "", err
				}
				i++
			}
		}
		row = append(row, p)
	}
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i := range row {
		row[i].Draw(canvases[0][i])
	}
	return savePNG(img, dir, "domains-forwarder.png")
}

func savePNG(img *vgimg.Canvas, dir, name string) (string, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("save plot %s: %w", name, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return "", fmt.Errorf("save plot %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("save plot %s: %w", name, err)
	}
	return name, nil
}
