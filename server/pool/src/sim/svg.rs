//! An SVG chart, written by hand: start-latency CDF per policy (log-x), GPUs
//! held over time per policy, and the frontier: GPU-hours against p90 start
//! (log-y) for every policy run, fixed keep-alives joined by a line.

use std::fmt::Write;

/// One policy's curves.
#[derive(Debug, Clone)]
pub(crate) struct Curve {
    pub(crate) name: String,
    /// (latency ms, fraction of jobs started within it).
    pub(crate) cdf: Vec<(u64, f64)>,
    /// (time s, GPUs held).
    pub(crate) held: Vec<(f64, f64)>,
    /// When the run ended (s).
    pub(crate) end_s: f64,
}

/// One policy on the frontier panel.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    pub(crate) name: String,
    pub(crate) gpu_hours: f64,
    pub(crate) p90_s: f64,
}

/// The time axis: the longest run, or twice the (lower) median run if
/// shorter.
fn axis_end(ends: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = ends.iter().copied().filter(|e| e.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let longest = sorted.last().copied().unwrap_or(1.0);
    let median = sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(1.0);
    longest.min(2.0 * median).max(1.0)
}

const COLORS: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

const W: f64 = 1720.0;
const H: f64 = 440.0;
const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 300.0;
const TOP: f64 = 60.0;
const LEFT: [f64; 3] = [80.0, 640.0, 1200.0];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// A tidy axis step for a span of `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn axes(svg: &mut String, x0: f64, title: &str, xlabel: &str, ylabel: &str) {
    let _ = write!(
        svg,
        r##"<text x="{tx}" y="{ty}" font-size="15" font-weight="bold">{title}</text>
<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#333"/>
<text x="{lx}" y="{ly}" font-size="12" text-anchor="middle">{xlabel}</text>
<text x="{yx}" y="{yy}" font-size="12" text-anchor="middle" transform="rotate(-90 {yx} {yy})">{ylabel}</text>
"##,
        tx = x0,
        ty = TOP - 14.0,
        lx = x0 + PANEL_W / 2.0,
        ly = TOP + PANEL_H + 38.0,
        yx = x0 - 48.0,
        yy = TOP + PANEL_H / 2.0,
    );
}

fn tick(svg: &mut String, x: f64, y: f64, label: &str, vertical: bool) {
    let (x2, y2, tx, ty, anchor) = if vertical {
        (x, y + 5.0, x, y + 18.0, "middle")
    } else {
        (x - 5.0, y, x - 8.0, y + 4.0, "end")
    };
    let _ = writeln!(
        svg,
        r##"<line x1="{x}" y1="{y}" x2="{x2}" y2="{y2}" stroke="#333"/><text x="{tx}" y="{ty}" font-size="11" text-anchor="{anchor}">{label}</text>"##
    );
}

fn grid(svg: &mut String, x1: f64, y1: f64, x2: f64, y2: f64) {
    let _ = writeln!(
        svg,
        r##"<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#ddd"/>"##
    );
}

fn polyline(svg: &mut String, points: &[(f64, f64)], color: &str) {
    if points.is_empty() {
        return;
    }
    let mut d = String::with_capacity(points.len() * 14);
    for (x, y) in points {
        let _ = write!(d, "{x:.1},{y:.1} ");
    }
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.8"/>"#,
        d.trim_end()
    );
}

/// The frontier panel: GPU-hours (x) against p90 start (y, log scale).
fn frontier(svg: &mut String, points: &[Point]) {
    let x0 = LEFT[2];
    axes(
        svg,
        x0,
        "Frontier: GPU-hours against p90 start",
        "GPU-hours held",
        "p90 start latency (s, log scale)",
    );
    let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
    let g_max = points
        .iter()
        .map(|p| finite(p.gpu_hours))
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.05;
    let p_max = points
        .iter()
        .map(|p| finite(p.p90_s))
        .fold(1.0f64, f64::max);
    let (lo, hi) = (-2.0f64, p_max.log10().ceil().max(1.0));
    let sx = |g: f64| (finite(g) / g_max).mul_add(PANEL_W, x0);
    let sy = |s: f64| {
        let l = s.max(0.01).log10().clamp(lo, hi);
        ((l - lo) / (hi - lo)).mul_add(-PANEL_H, TOP + PANEL_H)
    };
    let step = nice_step(g_max);
    let mut g = 0.0;
    while g <= g_max {
        grid(svg, sx(g), TOP, sx(g), TOP + PANEL_H);
        tick(svg, sx(g), TOP + PANEL_H, &fmt_num(g), true);
        g += step;
    }
    let mut e = lo as i32;
    while f64::from(e) <= hi {
        let y = sy(10f64.powi(e));
        grid(svg, x0, y, x0 + PANEL_W, y);
        tick(svg, x0, y, &fmt_num(10f64.powi(e)), false);
        e += 1;
    }
    let mut fixed: Vec<&Point> = points
        .iter()
        .filter(|p| p.name.starts_with("keepalive:"))
        .collect();
    fixed.sort_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
    let line: Vec<(f64, f64)> = fixed
        .iter()
        .map(|p| (sx(p.gpu_hours), sy(p.p90_s)))
        .collect();
    polyline(svg, &line, "#7f7f7f");
    for p in points {
        let (x, y) = (sx(p.gpu_hours), sy(p.p90_s));
        let (color, r, label) = match p.name.as_str() {
            "firepool" => ("#d62728", 6.0, "firepool".to_owned()),
            n if n.starts_with("always-on") => ("#1f77b4", 6.0, esc(n)),
            "fresh" => ("#333", 5.0, "fresh".to_owned()),
            n => (
                "#7f7f7f",
                3.5,
                esc(n.strip_prefix("keepalive:").unwrap_or(n)),
            ),
        };
        let _ = writeln!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{color}"/><text x="{tx:.1}" y="{ty:.1}" font-size="10" fill="{color}">{label}</text>"#,
            tx = x + r + 2.0,
            ty = y - r,
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{x}" y="{y}" font-size="11" fill="#7f7f7f">grey: fixed keep-alives (s)</text>"##,
        x = x0 + 8.0,
        y = TOP + 16.0,
    );
}

/// Renders the chart; the frontier panel shows `points`.
pub(crate) fn chart(title: &str, curves: &[Curve], points: &[Point]) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{cx}" y="22" font-size="16" text-anchor="middle">{title}</text>"#,
        cx = W / 2.0,
        title = esc(title),
    );

    // Left: CDF of start latency, log x from 10 ms.
    let x0 = LEFT[0];
    axes(
        &mut svg,
        x0,
        "Start latency CDF",
        "start latency (s, log scale)",
        "fraction of jobs",
    );
    let max_ms = curves
        .iter()
        .filter_map(|c| c.cdf.last().map(|p| p.0))
        .max()
        .unwrap_or(1_000)
        .max(1_000) as f64;
    let (lo, hi) = (-2.0f64, (max_ms / 1000.0).log10().ceil().max(2.0));
    let sx = |ms: f64| {
        let l = (ms.max(10.0) / 1000.0).log10().clamp(lo, hi);
        ((l - lo) / (hi - lo)).mul_add(PANEL_W, x0)
    };
    let sy = |f: f64| f.mul_add(-PANEL_H, TOP + PANEL_H);
    let mut e = lo as i32;
    while f64::from(e) <= hi {
        let x = sx(10f64.powi(e) * 1000.0);
        grid(&mut svg, x, TOP, x, TOP + PANEL_H);
        tick(&mut svg, x, TOP + PANEL_H, &fmt_num(10f64.powi(e)), true);
        e += 1;
    }
    for q in [0.0, 0.25, 0.5, 0.75, 0.9, 1.0] {
        grid(&mut svg, x0, sy(q), x0 + PANEL_W, sy(q));
        tick(&mut svg, x0, sy(q), &format!("{q}"), false);
    }
    for (i, c) in curves.iter().enumerate() {
        let mut pts = vec![(sx(10.0), sy(0.0))];
        let mut prev = 0.0;
        for &(ms, f) in &c.cdf {
            let x = sx(ms as f64);
            pts.push((x, sy(prev)));
            pts.push((x, sy(f)));
            prev = f;
        }
        pts.push((x0 + PANEL_W, sy(prev)));
        polyline(&mut svg, &pts, COLORS[i % COLORS.len()]);
    }

    // Right: GPUs held over time.
    let x0 = LEFT[1];
    axes(&mut svg, x0, "GPUs held over time", "time (s)", "GPUs held");
    // Fresh runs an order of magnitude longer than the rest; the axis stops
    // at twice the median run so the others stay readable.
    let ends: Vec<f64> = curves.iter().map(|c| c.end_s).collect();
    let t_max = axis_end(&ends);
    let g_max = curves
        .iter()
        .flat_map(|c| c.held.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.05;
    let sx = |t: f64| (t / t_max).mul_add(PANEL_W, x0);
    let sy = |g: f64| (g / g_max).mul_add(-PANEL_H, TOP + PANEL_H);
    let step = nice_step(t_max);
    let mut t = 0.0;
    while t <= t_max {
        grid(&mut svg, sx(t), TOP, sx(t), TOP + PANEL_H);
        tick(&mut svg, sx(t), TOP + PANEL_H, &fmt_num(t), true);
        t += step;
    }
    let step = nice_step(g_max);
    let mut g = 0.0;
    while g <= g_max {
        grid(&mut svg, x0, sy(g), x0 + PANEL_W, sy(g));
        tick(&mut svg, x0, sy(g), &fmt_num(g), false);
        g += step;
    }
    for (i, c) in curves.iter().enumerate() {
        let pts: Vec<(f64, f64)> = c
            .held
            .iter()
            .filter(|p| p.0 <= t_max)
            .map(|&(t, g)| (sx(t), sy(g)))
            .collect();
        polyline(&mut svg, &pts, COLORS[i % COLORS.len()]);
    }

    frontier(&mut svg, points);

    // Legend.
    for (i, c) in curves.iter().enumerate() {
        let x = (i as f64).mul_add(180.0, LEFT[0]);
        let y = H - 22.0;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{x2}" y2="{y}" stroke="{color}" stroke-width="3"/><text x="{tx}" y="{ty}" font-size="12">{name}</text>"#,
            x2 = x + 24.0,
            tx = x + 30.0,
            ty = y + 4.0,
            name = if c.end_s > t_max {
                format!("{} (to {:.0} s)", esc(&c.name), c.end_s)
            } else {
                esc(&c.name)
            },
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_is_well_formed_and_names_every_policy() {
        let curves = vec![
            Curve {
                name: "fresh".to_owned(),
                cdf: vec![(30_000, 1.0)],
                held: vec![(0.5, 3.0), (1.5, 4.0), (30.0, 1.0)],
                end_s: 30.0,
            },
            Curve {
                name: "a<b".to_owned(),
                cdf: vec![(100, 0.9), (1_000, 1.0)],
                held: vec![(0.5, 1.0)],
                end_s: 1.0,
            },
        ];
        let points = vec![
            Point {
                name: "keepalive:5".to_owned(),
                gpu_hours: 2.0,
                p90_s: 1.0,
            },
            Point {
                name: "keepalive:60".to_owned(),
                gpu_hours: 4.0,
                p90_s: 0.1,
            },
            Point {
                name: "firepool".to_owned(),
                gpu_hours: 1.5,
                p90_s: 0.1,
            },
        ];
        let svg = chart("t", &curves, &points);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        // Every policy on the frontier, the fixed keep-alives joined.
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains(">firepool<") && svg.contains(">60<"));
        // The axis stops at twice the median run; fresh's legend says so.
        assert!(svg.contains(">fresh (to 30 s)<") && svg.contains(">a&lt;b<"));
        assert_eq!(svg.matches("<polyline").count(), 5);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
