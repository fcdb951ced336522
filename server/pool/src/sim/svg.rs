//! The chart, drawn with plotters' SVG backend: start-latency CDF per policy
//! (log-x), GPUs held over time per policy, and the frontier: GPU-hours
//! against p90 start (log-y) for every policy run, fixed keep-alives joined
//! by a line.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

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

const COLORS: [RGBColor; 8] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];
const GREY: RGBColor = COLORS[7];

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// One panel: a chart on a third of the drawing, with `X` and `Y` axes.
type Panel<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A panel with its title, axes, tick labels and axis descriptions drawn.
fn panel<'a, 'b, X, Y>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    (x, xdesc): (X, &str),
    (y, ydesc): (Y, &str),
) -> Result<Panel<'a, 'b, X, Y>>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 15))
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .max_light_lines(0)
        .x_desc(xdesc)
        .y_desc(ydesc)
        .draw()?;
    Ok(chart)
}

/// Renders the chart; the frontier panel shows `points`.
pub(crate) fn chart(title: &str, curves: &[Curve], points: &[Point]) -> Result<String> {
    let mut svg = String::new();
    draw(&mut svg, title, curves, points)?;
    Ok(svg)
}

fn draw(svg: &mut String, title: &str, curves: &[Curve], points: &[Point]) -> Result {
    let root = SVGBackend::with_string(svg, (1720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 16))?;
    let (panels, legend) = root.split_vertically(380);
    let panels = panels.split_evenly((1, 3));

    // Left: CDF of start latency, log x from 10 ms.
    let max_s = curves
        .iter()
        .filter_map(|c| c.cdf.last())
        .map(|p| p.0)
        .max()
        .unwrap_or(0);
    let hi = 10f64.powf((max_s as f64 / 1000.0).log10().ceil().max(2.0));
    let x = ((0.01..hi).log_scale(), "start latency (s, log scale)");
    let mut cdf = panel(
        &panels[0],
        "Start latency CDF",
        x,
        (0.0..1.0, "fraction of jobs"),
    )?;
    for (i, c) in curves.iter().enumerate() {
        let mut pts = vec![(0.01, 0.0)];
        for &(ms, f) in &c.cdf {
            let s = (ms as f64 / 1000.0).max(0.01);
            pts.extend([(s, pts[pts.len() - 1].1), (s, f)]);
        }
        pts.push((hi, pts[pts.len() - 1].1));
        cdf.draw_series(LineSeries::new(
            pts,
            COLORS[i % COLORS.len()].stroke_width(2),
        ))?;
    }

    // Middle: GPUs held over time. Fresh runs an order of magnitude longer
    // than the rest; the axis stops at twice the median run.
    let ends: Vec<f64> = curves.iter().map(|c| c.end_s).collect();
    let t_max = axis_end(&ends);
    let g_max = curves
        .iter()
        .flat_map(|c| &c.held)
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.05;
    let mut held = panel(
        &panels[1],
        "GPUs held over time",
        (0.0..t_max, "time (s)"),
        (0.0..g_max, "GPUs held"),
    )?;
    for (i, c) in curves.iter().enumerate() {
        let pts = c.held.iter().copied().filter(|p| p.0 <= t_max);
        held.draw_series(LineSeries::new(
            pts,
            COLORS[i % COLORS.len()].stroke_width(2),
        ))?;
    }

    // Right: the frontier, GPU-hours against p90 start (log y).
    let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
    let g_max = points
        .iter()
        .map(|p| finite(p.gpu_hours))
        .fold(1e-6, f64::max)
        * 1.05;
    let p_max = points.iter().map(|p| finite(p.p90_s)).fold(1.0, f64::max);
    let mut frontier = panel(
        &panels[2],
        "Frontier: GPU-hours against p90 start",
        (0.0..g_max, "GPU-hours held"),
        (
            (0.01..10f64.powf(p_max.log10().ceil().max(1.0))).log_scale(),
            "p90 start latency (s, log scale)",
        ),
    )?;
    let mut fixed: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.name.starts_with("keepalive:"))
        .map(|p| (finite(p.gpu_hours), finite(p.p90_s).max(0.01)))
        .collect();
    fixed.sort_by(|a, b| a.0.total_cmp(&b.0));
    frontier.draw_series(LineSeries::new(fixed, GREY))?;
    frontier.draw_series(points.iter().map(|p| {
        let (color, r, label) = match p.name.as_str() {
            "firepool" => (COLORS[0], 6, p.name.as_str()),
            n if n.starts_with("always-on") => (COLORS[1], 6, n),
            "fresh" => (BLACK, 5, "fresh"),
            n => (GREY, 4, n.strip_prefix("keepalive:").unwrap_or(n)),
        };
        EmptyElement::at((finite(p.gpu_hours), finite(p.p90_s).max(0.01)))
            + Circle::new((0, 0), r, color.filled())
            + Text::new(
                label.to_owned(),
                (r + 2, -2 * r),
                ("sans-serif", 10).into_font().color(&color),
            )
    }))?;

    panels[2].draw(&Text::new(
        "grey: fixed keep-alives (s)",
        (110, 48),
        ("sans-serif", 11).into_font().color(&GREY),
    ))?;

    // Legend.
    for (i, c) in curves.iter().enumerate() {
        let name = if c.end_s > t_max {
            format!("{} (to {:.0} s)", c.name, c.end_s)
        } else {
            c.name.clone()
        };
        let x = 80 + 180 * i as i32;
        legend.draw(&PathElement::new(
            [(x, 20), (x + 24, 20)],
            COLORS[i % COLORS.len()].stroke_width(3),
        ))?;
        legend.draw(&Text::new(name, (x + 30, 14), ("sans-serif", 12)))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The text of every `<text>` element.
    pub(crate) fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect()
    }

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
        let svg = chart("t", &curves, &points).unwrap();
        let texts = texts(&svg);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        // Every policy on the frontier, the fixed keep-alives joined.
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(texts.contains(&"firepool") && texts.contains(&"60"));
        // The axis stops at twice the median run; fresh's legend says so.
        assert!(texts.contains(&"fresh (to 30 s)") && texts.contains(&"a&lt;b"));
        // Two curves in the CDF and GPUs-held panels each.
        assert_eq!(svg.matches(r#"stroke-width="2""#).count(), 4);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
