//! Charts as SVG text, drawn from numbers alone: line charts over two numeric axes that
//! start at zero (so points compare by eye) and horizontal bar charts, plain or stacked.
//! One engine serves `report --svg` (a standalone file) and the HTML report (inline, where
//! every chart carries `data-chart="NAME"` and each mark a `<title>` as its tooltip).

use std::fmt::Write as _;

/// Text made safe for HTML and SVG, in element content and in quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A step for about `parts` gridlines up to `max`: 1, 2, 2.5 or 5 times a power of ten.
fn nice_step(max: f64, parts: f64) -> f64 {
    let raw = (max / parts).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let m = raw / power;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 2.5 {
        2.5
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// A gridline's label: as many decimals as its step needs.
fn tick_label(v: f64, step: f64) -> String {
    let power = step.log10().floor();
    // A step of 2.5 × 10^k needs one decimal more than its power of ten.
    let quarter = (step / 10f64.powf(power) - 2.5).abs() < 1e-9;
    let decimals = (-power + f64::from(u8::from(quarter))).clamp(0.0, 6.0) as usize;
    format!("{v:.decimals$}")
}

/// One point of a series, with its tooltip.
#[derive(Clone, Debug)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub tip: String,
}

/// A line through points; `dots` draws each point as a circle too.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its name: the legend's text and the class of its marks.
    pub name: String,
    pub colour: &'static str,
    pub points: Vec<Point>,
    pub dots: bool,
}

/// A horizontal line at a value of the y axis (a budget), with its label.
#[derive(Clone, Debug)]
pub struct Rule {
    pub y: f64,
    pub label: String,
    pub colour: &'static str,
}

/// A label under the x axis at `x`, with a smaller second line.
#[derive(Clone, Debug)]
pub struct XLabel {
    pub x: f64,
    pub text: String,
    pub sub: String,
}

/// A shaded span of the x axis over the whole plot height (seconds with late ticks).
#[derive(Clone, Debug)]
pub struct Band {
    pub x0: f64,
    pub x1: f64,
    /// The class of its mark (`late`, `hitch`).
    pub class: &'static str,
    pub colour: &'static str,
    pub tip: String,
}

/// A line chart: series against a numeric x axis, both axes from zero.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// The `data-chart` name.
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub rules: Vec<Rule>,
    /// Labels at given x values; empty: numeric gridlines.
    pub x_labels: Vec<XLabel>,
    pub bands: Vec<Band>,
    /// The top of the y axis: values above it are drawn at the top edge. `None`: the
    /// largest value (and rule) with some headroom.
    pub y_limit: Option<f64>,
    /// A line in the top right corner.
    pub note: Option<String>,
    /// A log₂ x axis (for steps that double: 1, 2, 4 … 128 players), from half a doubling
    /// before the smallest x; x values are 1 or more.
    pub x_log2: bool,
    pub width: f64,
    pub height: f64,
}

const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 52.0;
const BOTTOM: f64 = 60.0;

impl LineChart {
    /// An empty chart of the usual size.
    pub fn new(name: &str, title: String, x_label: &str, y_label: &str) -> LineChart {
        LineChart {
            name: name.to_string(),
            title,
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            series: Vec::new(),
            rules: Vec::new(),
            x_labels: Vec::new(),
            bands: Vec::new(),
            y_limit: None,
            note: None,
            x_log2: false,
            width: 720.0,
            height: 420.0,
        }
    }

    /// True when no series has a point: nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.series.iter().all(|s| s.points.is_empty())
    }

    /// The chart as an `<svg>` element; `standalone` adds the namespace a `.svg` file needs.
    pub fn svg(&self, standalone: bool) -> String {
        let (w, h) = (self.width, self.height);
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.x));
        let x_max = xs
            .chain(self.x_labels.iter().map(|l| l.x))
            .chain(self.bands.iter().map(|b| b.x1))
            .fold(0.0, f64::max)
            .max(1e-9);
        let y_max = self.y_limit.unwrap_or_else(|| {
            let ys = self
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.y));
            ys.chain(self.rules.iter().map(|r| r.y))
                .fold(0.0, f64::max)
                .max(1e-3)
                * 1.15
        });
        let x_min = xs_min(self).max(1.0);
        let x = |v: f64| {
            let share = if self.x_log2 {
                let lo = x_min.log2() - 0.5;
                (v.max(1.0).log2() - lo) / (x_max.max(x_min).log2() - lo)
            } else {
                v / x_max
            };
            LEFT + (w - LEFT - RIGHT) * share
        };
        let y = |v: f64| h - BOTTOM - (h - TOP - BOTTOM) * v.min(y_max) / y_max;
        let mut svg = open_svg(&self.name, w, h, standalone);
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"22\" font-size=\"15\">{}</text>",
            esc(&self.title)
        );
        // The legend, under the title.
        let mut lx = LEFT;
        for s in &self.series {
            let _ = writeln!(
                svg,
                "<rect x=\"{lx:.1}\" y=\"32\" width=\"12\" height=\"4\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"38\" font-size=\"11\">{}</text>",
                s.colour,
                lx + 16.0,
                esc(&s.name)
            );
            lx += 24.0 + 7.0 * s.name.chars().count() as f64;
        }
        if let Some(note) = &self.note {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"38\" text-anchor=\"end\" font-size=\"10\" fill=\"#555\">{}</text>",
                w - RIGHT,
                esc(note)
            );
        }
        for b in &self.bands {
            let _ = writeln!(
                svg,
                "<rect class=\"{}\" x=\"{:.1}\" y=\"{TOP}\" width=\"{:.2}\" height=\"{:.1}\" \
                 fill=\"{}\" fill-opacity=\"0.25\"><title>{}</title></rect>",
                b.class,
                x(b.x0),
                (x(b.x1) - x(b.x0)).max(1.0),
                h - TOP - BOTTOM,
                b.colour,
                esc(&b.tip)
            );
        }
        // Axes, gridlines and their labels.
        let _ = writeln!(
            svg,
            "<path d=\"M{LEFT},{TOP} V{} H{}\" stroke=\"black\" fill=\"none\"/>",
            h - BOTTOM,
            w - RIGHT
        );
        let step = nice_step(y_max, 4.0);
        let mut v = 0.0;
        while v <= y_max * (1.0 + 1e-9) {
            let _ = writeln!(
                svg,
                "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"#e4e4e4\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                w - RIGHT,
                LEFT - 6.0,
                y(v) + 4.0,
                tick_label(v, step),
                yy = y(v)
            );
            v += step;
        }
        let mid = (TOP + h - BOTTOM) / 2.0;
        let _ = writeln!(
            svg,
            "<text x=\"16\" y=\"{mid:.1}\" transform=\"rotate(-90 16 {mid:.1})\" \
             text-anchor=\"middle\">{}</text>",
            esc(&self.y_label)
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            (LEFT + w - RIGHT) / 2.0,
            h - 8.0,
            esc(&self.x_label)
        );
        if self.x_labels.is_empty() && self.x_log2 {
            let mut v = 2f64.powf(x_min.log2().ceil());
            while v <= x_max * (1.0 + 1e-9) {
                let _ = writeln!(
                    svg,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v}</text>",
                    x(v),
                    h - BOTTOM + 16.0
                );
                v *= 2.0;
            }
        } else if self.x_labels.is_empty() {
            let step = nice_step(x_max, 8.0);
            let mut v = 0.0;
            while v <= x_max * (1.0 + 1e-9) {
                let _ = writeln!(
                    svg,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                    x(v),
                    h - BOTTOM + 16.0,
                    tick_label(v, step)
                );
                v += step;
            }
        }
        for l in &self.x_labels {
            let _ = writeln!(
                svg,
                "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
                 <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" \
                 fill=\"#555\">{}</text>",
                h - BOTTOM + 16.0,
                esc(&l.text),
                h - BOTTOM + 30.0,
                esc(&l.sub),
                cx = x(l.x)
            );
        }
        for r in &self.rules {
            let _ = writeln!(
                svg,
                "<line class=\"rule\" x1=\"{LEFT}\" y1=\"{ry:.1}\" x2=\"{}\" y2=\"{ry:.1}\" \
                 stroke=\"{c}\" stroke-dasharray=\"6 4\"/><text x=\"{}\" y=\"{:.1}\" \
                 fill=\"{c}\" text-anchor=\"end\">{}</text>",
                w - RIGHT,
                w - RIGHT,
                y(r.y) - 5.0,
                esc(&r.label),
                ry = y(r.y),
                c = r.colour
            );
        }
        for s in &self.series {
            let points: Vec<String> = s
                .points
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.x), y(p.y)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline class=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" \
                 stroke-width=\"2\"/>",
                esc(&s.name),
                points.join(" "),
                s.colour
            );
            if s.dots {
                for p in &s.points {
                    let _ = writeln!(
                        svg,
                        "<circle class=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{}\">\
                         <title>{}</title></circle>",
                        esc(&s.name),
                        x(p.x),
                        y(p.y),
                        s.colour,
                        esc(&p.tip)
                    );
                }
            }
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// The smallest x of the chart's points and labels (infinity with none).
fn xs_min(c: &LineChart) -> f64 {
    let points = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.x));
    points
        .chain(c.x_labels.iter().map(|l| l.x))
        .fold(f64::INFINITY, f64::min)
}

fn open_svg(name: &str, w: f64, h: f64, standalone: bool) -> String {
    format!(
        "<svg{} data-chart=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n",
        if standalone {
            " xmlns=\"http://www.w3.org/2000/svg\""
        } else {
            ""
        },
        esc(name)
    )
}

/// One part of a bar.
#[derive(Clone, Debug)]
pub struct Segment {
    pub name: String,
    pub value: f64,
    pub colour: &'static str,
}

/// One bar: its label and its parts, stacked left to right.
#[derive(Clone, Debug)]
pub struct Bar {
    pub label: String,
    pub segments: Vec<Segment>,
}

/// Horizontal bars from zero, plain or stacked, each ending in its total.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// The `data-chart` name.
    pub name: String,
    pub title: String,
    /// The unit of the values, after each total.
    pub unit: String,
    /// How many decimals the totals show.
    pub decimals: usize,
    pub bars: Vec<Bar>,
    /// A vertical line at a value (a budget).
    pub rule: Option<Rule>,
    /// The right end of the axis; `None`: the largest total with some headroom.
    pub max: Option<f64>,
    pub width: f64,
}

impl BarChart {
    /// An empty chart of the usual width.
    pub fn new(name: &str, title: String, unit: &str, decimals: usize) -> BarChart {
        BarChart {
            name: name.to_string(),
            title,
            unit: unit.to_string(),
            decimals,
            bars: Vec::new(),
            rule: None,
            max: None,
            width: 720.0,
        }
    }

    /// True when no bar has a part: nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.bars.iter().all(|b| b.segments.is_empty())
    }

    /// The chart as an inline `<svg>` element.
    pub fn svg(&self) -> String {
        const LABEL: f64 = 150.0;
        const ROW: f64 = 30.0;
        let stacked = self.bars.iter().any(|b| b.segments.len() > 1);
        // Stacked bars get a legend: one entry per part name, in order of appearance.
        let mut legend: Vec<(&str, &str)> = Vec::new();
        if stacked {
            for s in self.bars.iter().flat_map(|b| &b.segments) {
                if !legend.iter().any(|(n, _)| *n == s.name) {
                    legend.push((&s.name, s.colour));
                }
            }
        }
        let legend_rows = legend.len().div_ceil(5) as f64;
        let top = 34.0 + 18.0 * legend_rows;
        let w = self.width;
        let h = top + ROW * self.bars.len() as f64 + 30.0;
        let total = |b: &Bar| b.segments.iter().map(|s| s.value).sum::<f64>();
        let max = self.max.unwrap_or_else(|| {
            self.bars
                .iter()
                .map(total)
                .chain(self.rule.iter().map(|r| r.y))
                .fold(0.0, f64::max)
                .max(1e-9)
                * 1.2
        });
        let x = |v: f64| LABEL + (w - LABEL - 90.0) * v / max;
        let mut svg = open_svg(&self.name, w, h, false);
        let _ = writeln!(
            svg,
            "<text x=\"10\" y=\"22\" font-size=\"15\">{}</text>",
            esc(&self.title)
        );
        for (i, (name, colour)) in legend.iter().enumerate() {
            let (col, row) = ((i % 5) as f64, (i / 5) as f64);
            let lx = LABEL + 112.0 * col;
            let _ = writeln!(
                svg,
                "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
                32.0 + 18.0 * row,
                lx + 14.0,
                41.0 + 18.0 * row,
                esc(name),
            );
        }
        for (i, b) in self.bars.iter().enumerate() {
            let y0 = top + ROW * i as f64;
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LABEL - 8.0,
                y0 + 19.0,
                esc(&b.label)
            );
            let mut at = 0.0;
            for s in &b.segments {
                let _ = writeln!(
                    svg,
                    "<rect class=\"bar\" x=\"{:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"20\" \
                     fill=\"{}\"><title>{}: {:.*} {}</title></rect>",
                    x(at),
                    y0 + 5.0,
                    (x(at + s.value) - x(at)).max(0.0),
                    s.colour,
                    esc(&s.name),
                    self.decimals,
                    s.value,
                    esc(&self.unit)
                );
                at += s.value;
            }
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{:.*} {}</text>",
                x(at) + 6.0,
                y0 + 19.0,
                self.decimals,
                at,
                esc(&self.unit)
            );
        }
        let bottom = h - 30.0;
        let _ = writeln!(
            svg,
            "<path d=\"M{LABEL},{top} V{bottom}\" stroke=\"black\" fill=\"none\"/>"
        );
        if let Some(r) = &self.rule {
            let _ = writeln!(
                svg,
                "<line class=\"rule\" x1=\"{rx:.1}\" y1=\"{}\" x2=\"{rx:.1}\" y2=\"{bottom}\" \
                 stroke=\"{c}\" stroke-dasharray=\"6 4\"/><text x=\"{rx:.1}\" y=\"{:.1}\" \
                 fill=\"{c}\" text-anchor=\"middle\" font-size=\"11\">{}</text>",
                top - 4.0,
                bottom + 16.0,
                esc(&r.label),
                rx = x(r.y),
                c = r.colour
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        assert_eq!(
            esc("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
    }

    #[test]
    fn gridline_steps_are_round_numbers() {
        assert_eq!(nice_step(0.117, 4.0), 0.05);
        assert_eq!(nice_step(100.0, 4.0), 25.0);
        assert_eq!(nice_step(7.0, 4.0), 2.0);
        assert_eq!(tick_label(0.1, 0.05), "0.10");
        assert_eq!(tick_label(50.0, 25.0), "50");
        assert_eq!(tick_label(5.0, 2.5), "5.0");
        assert_eq!(tick_label(0.5, 0.25), "0.50");
    }

    #[test]
    fn a_line_chart_draws_each_series_and_clips_at_its_limit() {
        let mut c = LineChart::new("t", "a <title>".into(), "x", "y");
        c.series.push(Series {
            name: "p50".into(),
            colour: "#000",
            points: (0..3)
                .map(|i| Point {
                    x: f64::from(i),
                    y: f64::from(i),
                    tip: format!("point {i}"),
                })
                .collect(),
            dots: true,
        });
        c.y_limit = Some(1.0);
        let svg = c.svg(false);
        assert!(svg.starts_with("<svg data-chart=\"t\""), "{svg}");
        assert!(!svg.contains("xmlns"), "inline in HTML");
        assert!(c.svg(true).contains("xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.contains("a &lt;title&gt;"));
        assert_eq!(svg.matches("<circle class=\"p50\"").count(), 3);
        assert!(svg.contains("<title>point 2</title>"));
        // The point at 2 is clipped to the top of the plot, as the one at 1 is.
        let cy = |i: usize| {
            let l = svg
                .lines()
                .filter(|l| l.starts_with("<circle"))
                .nth(i)
                .unwrap();
            let at = l.find("cy=\"").unwrap() + 4;
            l[at..].split('"').next().unwrap().to_string()
        };
        assert_eq!(cy(1), format!("{TOP:.1}"));
        assert_eq!(cy(2), cy(1));
    }

    #[test]
    fn a_log_axis_spaces_doublings_evenly() {
        let mut c = LineChart::new("log", "t".into(), "players", "Hz");
        c.x_log2 = true;
        c.series.push(Series {
            name: "rate".into(),
            colour: "#000",
            points: [1.0, 2.0, 4.0, 8.0]
                .iter()
                .map(|&x| Point {
                    x,
                    y: 1.0,
                    tip: String::new(),
                })
                .collect(),
            dots: true,
        });
        let svg = c.svg(false);
        let cx: Vec<f64> = svg
            .lines()
            .filter(|l| l.starts_with("<circle"))
            .map(|l| {
                let at = l.find("cx=\"").unwrap() + 4;
                l[at..].split('"').next().unwrap().parse().unwrap()
            })
            .collect();
        let gaps: Vec<f64> = cx.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| (g - gaps[0]).abs() < 0.2), "{cx:?}");
        assert!(cx[0] > LEFT, "the first point is off the axis: {cx:?}");
        assert!(svg.contains(">8</text>"), "labelled at the powers of two");
    }

    #[test]
    fn a_stacked_bar_puts_its_parts_end_to_end_with_a_legend() {
        let mut c = BarChart::new("b", "split".into(), "ms", 3);
        let seg = |name: &str, value| Segment {
            name: name.into(),
            value,
            colour: "#111",
        };
        c.bars.push(Bar {
            label: "categories".into(),
            segments: vec![seg("network", 0.02), seg("fow", 0.01)],
        });
        c.max = Some(0.1);
        let svg = c.svg();
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 2);
        assert!(svg.contains("<title>fow: 0.010 ms</title>"));
        assert!(svg.contains(">0.030 ms</text>"), "{svg}");
        // The second part starts where the first ends.
        let xs: Vec<(f64, f64)> = svg
            .lines()
            .filter(|l| l.starts_with("<rect class=\"bar\""))
            .map(|l| {
                let num = |key: &str| -> f64 {
                    let at = l.find(key).unwrap() + key.len();
                    l[at..].split('"').next().unwrap().parse().unwrap()
                };
                (num(" x=\""), num(" width=\""))
            })
            .collect();
        assert!((xs[0].0 + xs[0].1 - xs[1].0).abs() < 0.02, "{xs:?}");
        assert!(svg.contains(">network</text>") && svg.contains(">fow</text>"));
    }
}
