//! The capacity model, as pure functions of a sweep's figures: no I/O, no clock.
//!
//! A many-matches sweep measures, at each step, the share of one core the server used while
//! its worker ran `m` matches. The model is the straight line through the steps whose CPU
//! says what the matches cost ([`steps_of`]), `cpu(m) = intercept + per_match × m` (least
//! squares), in shares of one core: the
//! intercept is what the worker spends with no match (its wake-ups and the spin before each
//! deadline), the slope one match's ticks, socket calls included. A core is planned to run
//! the most matches whose predicted CPU stays within `1 − headroom`, and never more than a
//! step of the sweep was seen to hold.

use tickforge_telemetry::report::{Sweep, SweepStep};

/// Share of ticks a run must start on time to count as held: DESIGN.md's measured games
/// per core, as `bench --sweep` judges a step (the bench's own constant).
pub use crate::bench::checks::ON_TIME;

/// A fit with a step further than this share of a core from its line is flagged as noisy:
/// at a core planned to 80%, 3% of a core is about 4% of its matches. Measured in shares
/// of a core, not of the step's figure: a step of one match uses 2% of a core, and a
/// point of a core either way there says nothing of the slope.
pub const NOISY_RESIDUAL: f64 = 0.03;

/// One step's figure: matches on the worker and the share of one core the server used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Matches on the worker core.
    pub matches: u32,
    /// Share of one core in use, 0..=1 (more on a server with more than one thread busy).
    pub cpu: f64,
}

/// The steps of a sweep the fit may use, and the others with the reason they were left
/// out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Steps {
    /// Steps whose CPU the fit uses.
    pub used: Vec<Point>,
    /// `(matches, why)` for each step left out.
    pub excluded: Vec<(u32, &'static str)>,
}

/// A step whose server used this share of a core or more ran its core flat out: its CPU
/// says what the core had, not what the matches asked for.
pub const SATURATED_CPU: f64 = 0.95;

/// Sorts a sweep's steps into those the fit may use and the rest. A step's CPU counts when
/// every tick ran (none skipped), the core was not full and the bots kept up: the CPU a
/// tick costs does not depend on when it started, so a step whose ticks started late on a
/// busy host (under 99.5% on time: not held) still measures it. Holding is what caps the
/// plan ([`Ask::held`]), not what the line is fitted to.
pub fn steps_of(sweep: &Sweep) -> Steps {
    let mut out = Steps::default();
    for s in &sweep.steps {
        match why_excluded(s) {
            None => out.used.push(Point {
                matches: s.matches,
                cpu: s.worker_util.expect("checked by why_excluded"),
            }),
            Some(why) => out.excluded.push((s.matches, why)),
        }
    }
    out
}

/// Why a step's CPU is not what its matches cost; `None` when it is.
pub fn why_excluded(s: &SweepStep) -> Option<&'static str> {
    match s.worker_util {
        _ if s.bots_saturated => Some("the bots saturated"),
        _ if s.skipped > 0 => Some("ticks skipped: the core fell behind"),
        Some(u) if u.is_finite() && (0.0..SATURATED_CPU).contains(&u) => None,
        Some(u) if u.is_finite() && u >= SATURATED_CPU => Some("the core was full"),
        _ => Some("no CPU figure"),
    }
}

/// `cpu(m) = intercept + per_match × m`, fitted by least squares.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// Share of one core used with no match.
    pub intercept: f64,
    /// Share of one core each match adds.
    pub per_match: f64,
    /// The points fitted.
    pub points: Vec<Point>,
    /// Share of the steps' CPU variance the line explains, 0..=1.
    pub r_squared: f64,
    /// Largest |measured − predicted| over the points, share of one core.
    pub max_residual: f64,
    /// Largest |measured − predicted| ÷ measured over the points.
    pub max_relative_residual: f64,
}

/// Why a sweep cannot be fitted.
#[derive(Clone, Debug, PartialEq)]
pub enum FitError {
    /// Fewer than two different match counts held: a line needs two.
    TooFewSteps(usize),
    /// The CPU did not grow with the matches: noise swamped the cost of a match.
    NoGrowth(f64),
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::TooFewSteps(n) => write!(
                f,
                "the sweep has {n} step(s) whose CPU counts (a CPU figure, no tick skipped, \
                 the core not full, the bots not saturated); a fit needs at least 2 different \
                 match counts"
            ),
            FitError::NoGrowth(slope) => write!(
                f,
                "the sweep's CPU does not grow with matches (slope {slope:.5} of a core per \
                 match): its steps are too noisy or too close together to plan from"
            ),
        }
    }
}

impl std::error::Error for FitError {}

impl Fit {
    /// Fits the line through `points`.
    pub fn new(points: &[Point]) -> Result<Fit, FitError> {
        let mut counts: Vec<u32> = points.iter().map(|p| p.matches).collect();
        counts.sort_unstable();
        counts.dedup();
        if counts.len() < 2 {
            return Err(FitError::TooFewSteps(points.len()));
        }
        let n = points.len() as f64;
        let mean_m = points.iter().map(|p| f64::from(p.matches)).sum::<f64>() / n;
        let mean_c = points.iter().map(|p| p.cpu).sum::<f64>() / n;
        let (mut smm, mut smc, mut scc) = (0.0, 0.0, 0.0);
        for p in points {
            let (dm, dc) = (f64::from(p.matches) - mean_m, p.cpu - mean_c);
            smm += dm * dm;
            smc += dm * dc;
            scc += dc * dc;
        }
        let per_match = smc / smm;
        if per_match.is_nan() || per_match <= 0.0 {
            return Err(FitError::NoGrowth(per_match));
        }
        let intercept = mean_c - per_match * mean_m;
        let mut fit = Fit {
            intercept,
            per_match,
            points: points.to_vec(),
            r_squared: 0.0,
            max_residual: 0.0,
            max_relative_residual: 0.0,
        };
        let sse: f64 = points
            .iter()
            .map(|p| (p.cpu - fit.cpu(p.matches)).powi(2))
            .sum();
        fit.r_squared = if scc > 0.0 { 1.0 - sse / scc } else { 1.0 };
        fit.max_residual = points
            .iter()
            .map(|p| (p.cpu - fit.cpu(p.matches)).abs())
            .fold(0.0, f64::max);
        fit.max_relative_residual = points
            .iter()
            .map(|p| fit.relative_residual(*p))
            .fold(0.0, f64::max);
        Ok(fit)
    }

    /// Predicted share of one core with `matches` matches at the sweep's tick rate.
    pub fn cpu(&self, matches: u32) -> f64 {
        self.intercept + self.per_match * f64::from(matches)
    }

    /// |measured − predicted| ÷ measured at one point (the predicted error when 0 was
    /// measured).
    pub fn relative_residual(&self, p: Point) -> f64 {
        let d = (p.cpu - self.cpu(p.matches)).abs();
        if p.cpu > 0.0 {
            d / p.cpu
        } else {
            d
        }
    }

    /// Largest match count fitted.
    pub fn max_matches(&self) -> u32 {
        self.points.iter().map(|p| p.matches).max().unwrap_or(0)
    }

    /// True when some step lies further from the line than [`NOISY_RESIDUAL`].
    pub fn is_noisy(&self) -> bool {
        self.max_residual > NOISY_RESIDUAL
    }
}

/// The check a sweep can make of itself, with no new run: each step between the first and
/// the last predicted by the line through all the others, as `(matches, predicted ÷
/// measured)`. Empty with fewer than four points (three are left to fit by then).
pub fn leave_one_out(points: &[Point]) -> Vec<(u32, f64)> {
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.matches);
    let mut out = Vec::new();
    if sorted.len() < 4 {
        return out;
    }
    for i in 1..sorted.len() - 1 {
        let mut rest = sorted.clone();
        let p = rest.remove(i);
        if let Ok(fit) = Fit::new(&rest) {
            if p.cpu > 0.0 {
                out.push((p.matches, fit.cpu(p.matches) / p.cpu));
            }
        }
    }
    out
}

/// What a plan is asked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ask {
    /// Concurrent players to host.
    pub players: u64,
    /// Players in a match.
    pub players_per_match: u32,
    /// Share of each core kept free, 0..1.
    pub headroom: f64,
    /// Tick rate to plan for ÷ the sweep's: the fit's CPU scales with it.
    pub tick_scale: f64,
    /// Cores of one host.
    pub host_cores: u32,
    /// Of them, cores kept for the OS and anything else: no worker runs on them.
    pub reserved_cores: u32,
    /// Most matches a step of the sweep held (`Sweep::measured_games_per_core`).
    pub held: Option<u32>,
}

/// What bounded the matches a core is planned to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The predicted CPU reached the budget (`1 − headroom`).
    Cpu,
    /// The CPU would allow more, but no step of the sweep held more.
    Held,
}

impl Bound {
    /// Its name in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Bound::Cpu => "cpu",
            Bound::Held => "held",
        }
    }
}

/// The answer: matches per core, cores, hosts.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Matches needed: players ÷ players per match, rounded up.
    pub matches: u64,
    /// Share of a core a worker may use: `1 − headroom`.
    pub budget: f64,
    /// Most matches whose predicted CPU fits the budget.
    pub per_core_by_cpu: u32,
    /// Most matches a step held, scaled to the tick rate planned for; `None` without one.
    pub per_core_held: Option<u32>,
    /// Matches planned per core: the smaller of the two.
    pub per_core: u32,
    /// Which of them it is.
    pub bound: Bound,
    /// Predicted share of a core at `per_core` matches, at the tick rate planned for.
    pub cpu_at_per_core: f64,
    /// Worker cores needed.
    pub cores: u64,
    /// Cores of a host left for workers.
    pub usable_cores_per_host: u32,
    /// Hosts needed.
    pub hosts: u64,
    /// Matches one host holds: `per_core × usable_cores_per_host`.
    pub matches_per_host: u64,
    /// Players one host holds.
    pub players_per_host: u64,
}

/// Why no plan can be made.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanError {
    /// The budget is spent before the first match.
    NothingFits {
        /// The budget, share of a core.
        budget: f64,
        /// Predicted share of a core at one match.
        cpu_at_one: f64,
    },
    /// `--reserved-cores` leaves no core for a worker.
    NoUsableCore {
        /// `--host-cores`.
        host: u32,
        /// `--reserved-cores`.
        reserved: u32,
    },
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::NothingFits { budget, cpu_at_one } => write!(
                f,
                "--headroom: one match is predicted to use {:.1}% of a core, over the {:.1}% \
                 the headroom leaves; lower --headroom (or the tick rate)",
                cpu_at_one * 100.0,
                budget * 100.0
            ),
            PlanError::NoUsableCore { host, reserved } => write!(
                f,
                "--reserved-cores {reserved}: leaves no worker core of the {host} of \
                 --host-cores; expected fewer reserved cores than host cores"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// Plans `ask` on `fit`.
pub fn plan(fit: &Fit, ask: &Ask) -> Result<Plan, PlanError> {
    let usable = ask.host_cores.saturating_sub(ask.reserved_cores);
    if usable == 0 {
        return Err(PlanError::NoUsableCore {
            host: ask.host_cores,
            reserved: ask.reserved_cores,
        });
    }
    let budget = 1.0 - ask.headroom;
    let (a, b) = (
        fit.intercept * ask.tick_scale,
        fit.per_match * ask.tick_scale,
    );
    // A hair over the quotient, so that a budget met exactly by m matches counts m.
    let by_cpu = ((budget - a) / b + 1e-9).floor();
    if by_cpu < 1.0 {
        return Err(PlanError::NothingFits {
            budget,
            cpu_at_one: a + b,
        });
    }
    let per_core_by_cpu = by_cpu.min(f64::from(u32::MAX)) as u32;
    // The held step scales as the CPU does: at half the tick rate a core holds twice the
    // matches, on the same straight-line assumption.
    let per_core_held = ask
        .held
        .map(|h| ((f64::from(h) / ask.tick_scale).floor() as u32).max(1));
    let (per_core, bound) = match per_core_held {
        Some(h) if h < per_core_by_cpu => (h, Bound::Held),
        _ => (per_core_by_cpu, Bound::Cpu),
    };
    let matches = ask.players.div_ceil(u64::from(ask.players_per_match));
    let cores = matches.div_ceil(u64::from(per_core));
    let hosts = cores.div_ceil(u64::from(usable));
    let matches_per_host = u64::from(per_core) * u64::from(usable);
    Ok(Plan {
        matches,
        budget,
        per_core_by_cpu,
        per_core_held,
        per_core,
        bound,
        cpu_at_per_core: a + b * f64::from(per_core),
        cores,
        usable_cores_per_host: usable,
        hosts,
        matches_per_host,
        players_per_host: matches_per_host * u64::from(ask.players_per_match),
    })
}

/// The middle of `values` (the mean of the two middle ones for an even count); `None`
/// when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The match count a check runs by default: halfway between the two largest steps the fit
/// used, so that it tests the line between points, not a point of it.
pub fn check_matches(fit: &Fit) -> u32 {
    let mut counts: Vec<u32> = fit.points.iter().map(|p| p.matches).collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [.., a, b] => a + (b - a) / 2,
        [a] => *a,
        [] => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(v: &[(u32, f64)]) -> Vec<Point> {
        v.iter()
            .map(|&(matches, cpu)| Point { matches, cpu })
            .collect()
    }

    fn ask(players: u64) -> Ask {
        Ask {
            players,
            players_per_match: 10,
            headroom: 0.2,
            tick_scale: 1.0,
            host_cores: 16,
            reserved_cores: 0,
            held: None,
        }
    }

    fn step(matches: u32, cpu: f64, on_time: f64) -> SweepStep {
        SweepStep {
            matches,
            players: 10,
            worker_util: Some(cpu),
            on_time_rate: Some(on_time),
            ..SweepStep::default()
        }
    }

    #[test]
    fn an_exact_line_is_recovered_with_no_residual() {
        // 5% of a core idle, 1% per match.
        let fit = Fit::new(&points(&[(1, 0.06), (10, 0.15), (20, 0.25), (40, 0.45)])).unwrap();
        assert!((fit.intercept - 0.05).abs() < 1e-12, "{fit:?}");
        assert!((fit.per_match - 0.01).abs() < 1e-12, "{fit:?}");
        assert!(fit.max_relative_residual < 1e-9 && (fit.r_squared - 1.0).abs() < 1e-9);
        assert!(fit.max_residual < 1e-12);
        assert!(!fit.is_noisy());
        assert!((fit.cpu(30) - 0.35).abs() < 1e-12);
        assert_eq!(fit.max_matches(), 40);
    }

    #[test]
    fn per_core_is_the_most_matches_within_the_budget_after_headroom() {
        let fit = Fit::new(&points(&[(1, 0.06), (40, 0.45)])).unwrap();
        // 0.05 + 0.01 m ≤ 0.8 → m ≤ 75.
        let p = plan(&fit, &ask(1000)).unwrap();
        assert_eq!(
            (p.per_core_by_cpu, p.per_core, p.bound),
            (75, 75, Bound::Cpu)
        );
        assert!((p.budget - 0.8).abs() < 1e-12);
        assert!((p.cpu_at_per_core - 0.8).abs() < 1e-9);
        // 1000 players → 100 matches → 2 cores → 1 host of 16.
        assert_eq!((p.matches, p.cores, p.hosts), (100, 2, 1));
        assert_eq!(
            (p.matches_per_host, p.players_per_host),
            (75 * 16, 75 * 160)
        );
        // No headroom: 0.05 + 0.01 m ≤ 1 → 95.
        let p = plan(
            &fit,
            &Ask {
                headroom: 0.0,
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!(p.per_core, 95);
        // Half the core kept: 45.
        let p = plan(
            &fit,
            &Ask {
                headroom: 0.5,
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!(p.per_core, 45);
    }

    #[test]
    fn players_round_up_to_matches_cores_and_hosts() {
        let fit = Fit::new(&points(&[(1, 0.06), (40, 0.45)])).unwrap();
        let a = Ask {
            host_cores: 8,
            reserved_cores: 2,
            ..ask(0)
        };
        // 75 per core, 6 usable cores a host: 450 matches a host.
        for (players, matches, cores, hosts) in [
            (1, 1, 1, 1),
            (10, 1, 1, 1),
            (11, 2, 1, 1),
            (750, 75, 1, 1),
            (751, 76, 2, 1),
            (4500, 450, 6, 1),
            (4501, 451, 7, 2),
            (100_000, 10_000, 134, 23),
        ] {
            let p = plan(&fit, &Ask { players, ..a }).unwrap();
            assert_eq!(
                (p.matches, p.cores, p.hosts),
                (matches, cores, hosts),
                "{players} players"
            );
            assert_eq!(p.usable_cores_per_host, 6);
            assert_eq!(p.matches_per_host, 450);
        }
    }

    #[test]
    fn reserving_every_core_or_a_headroom_that_leaves_no_match_is_refused() {
        let fit = Fit::new(&points(&[(1, 0.06), (40, 0.45)])).unwrap();
        let e = plan(
            &fit,
            &Ask {
                host_cores: 4,
                reserved_cores: 4,
                ..ask(10)
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            PlanError::NoUsableCore {
                host: 4,
                reserved: 4
            }
        );
        assert!(e.to_string().starts_with("--reserved-cores 4"), "{e}");
        // 0.06 of a core for one match, 0.05 left.
        let e = plan(
            &fit,
            &Ask {
                headroom: 0.95,
                ..ask(10)
            },
        )
        .unwrap_err();
        assert!(matches!(e, PlanError::NothingFits { .. }), "{e:?}");
        assert!(e.to_string().starts_with("--headroom"), "{e}");
    }

    #[test]
    fn another_tick_rate_scales_the_cost_of_every_match_and_of_the_idle_core() {
        let fit = Fit::new(&points(&[(1, 0.06), (40, 0.45)])).unwrap();
        // Twice the tick rate: 0.1 + 0.02 m ≤ 0.8 → 35.
        let p = plan(
            &fit,
            &Ask {
                tick_scale: 2.0,
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!(p.per_core, 35);
        assert!((p.cpu_at_per_core - 0.8).abs() < 1e-9);
        // Half: 0.025 + 0.005 m ≤ 0.8 → 155.
        let p = plan(
            &fit,
            &Ask {
                tick_scale: 0.5,
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!(p.per_core_by_cpu, 155);
    }

    #[test]
    fn no_core_is_planned_past_the_most_matches_a_step_held() {
        let fit = Fit::new(&points(&[(1, 0.06), (40, 0.45)])).unwrap();
        let p = plan(
            &fit,
            &Ask {
                held: Some(60),
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!(
            (p.per_core_by_cpu, p.per_core, p.bound),
            (75, 60, Bound::Held)
        );
        assert!((p.cpu_at_per_core - 0.65).abs() < 1e-9);
        assert_eq!(p.cores, 2);
        // A held step beyond the CPU bound changes nothing.
        let p = plan(
            &fit,
            &Ask {
                held: Some(120),
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!((p.per_core, p.bound), (75, Bound::Cpu));
        // At half the tick rate the held step counts double: 120 < 155.
        let p = plan(
            &fit,
            &Ask {
                held: Some(60),
                tick_scale: 0.5,
                ..ask(1000)
            },
        )
        .unwrap();
        assert_eq!(
            (p.per_core_held, p.per_core, p.bound),
            (Some(120), 120, Bound::Held)
        );
    }

    #[test]
    fn a_noisy_sweep_fits_near_its_true_line_and_is_flagged() {
        // The line 0.05 + 0.01 m, each step off by up to 15% either way.
        let noise = [0.15, -0.12, 0.08, -0.15, 0.15, -0.05, 0.02];
        let counts = [1u32, 5, 10, 20, 30, 40, 50];
        let pts: Vec<Point> = counts
            .iter()
            .zip(noise)
            .map(|(&m, e)| Point {
                matches: m,
                cpu: (0.05 + 0.01 * f64::from(m)) * (1.0 + e),
            })
            .collect();
        let fit = Fit::new(&pts).unwrap();
        assert!((fit.per_match - 0.01).abs() < 0.002, "{fit:?}");
        assert!(
            fit.is_noisy() && fit.max_residual > NOISY_RESIDUAL,
            "{fit:?}"
        );
        assert!(fit.r_squared > 0.9 && fit.r_squared < 1.0, "{fit:?}");
        // Still a plan, near the noiseless 75.
        let p = plan(&fit, &ask(1000)).unwrap();
        assert!((65..=85).contains(&p.per_core), "{p:?}");
    }

    #[test]
    fn a_jumpy_first_step_of_a_straight_sweep_is_not_noise() {
        // One match measured at 2% of a core against 3% on the line: half its figure, one
        // point of a core.
        let fit = Fit::new(&points(&[
            (1, 0.02),
            (10, 0.15),
            (20, 0.25),
            (40, 0.45),
            (80, 0.85),
        ]))
        .unwrap();
        assert!(fit.max_relative_residual > 0.3, "{fit:?}");
        assert!(!fit.is_noisy(), "{fit:?}");
    }

    #[test]
    fn a_sweep_of_one_step_or_one_count_is_refused() {
        assert_eq!(
            Fit::new(&points(&[(10, 0.2)])),
            Err(FitError::TooFewSteps(1))
        );
        assert_eq!(
            Fit::new(&points(&[(10, 0.2), (10, 0.21)])),
            Err(FitError::TooFewSteps(2))
        );
        assert_eq!(Fit::new(&[]), Err(FitError::TooFewSteps(0)));
        let e = Fit::new(&points(&[(10, 0.2)])).unwrap_err().to_string();
        assert!(e.contains("at least 2"), "{e}");
    }

    #[test]
    fn a_sweep_whose_cpu_falls_with_matches_is_refused() {
        let e = Fit::new(&points(&[(1, 0.3), (10, 0.2)])).unwrap_err();
        assert!(matches!(e, FitError::NoGrowth(s) if s < 0.0), "{e:?}");
        assert!(matches!(
            Fit::new(&points(&[(1, 0.3), (10, 0.3)])),
            Err(FitError::NoGrowth(_))
        ));
    }

    #[test]
    fn steps_are_fitted_unless_skipped_saturated_full_or_without_cpu() {
        let mut no_cpu = step(30, 0.0, 1.0);
        no_cpu.worker_util = None;
        let mut saturated = step(40, 0.5, 1.0);
        saturated.bots_saturated = true;
        let mut skipped = step(50, 0.6, 1.0);
        skipped.skipped = 3;
        let sweep = Sweep {
            steps: vec![
                step(1, 0.06, 1.0),
                step(10, 0.15, 0.995),
                // Late ticks on a busy host: not held, but its CPU is the matches'.
                step(20, 0.25, 0.98),
                no_cpu,
                saturated,
                skipped,
                step(60, 0.97, 0.5),
            ],
            ..Sweep::default()
        };
        let s = steps_of(&sweep);
        assert_eq!(s.used, points(&[(1, 0.06), (10, 0.15), (20, 0.25)]));
        let left: Vec<u32> = s.excluded.iter().map(|e| e.0).collect();
        assert_eq!(left, [30, 40, 50, 60]);
        assert!(s.excluded[0].1.contains("no CPU"));
        assert!(s.excluded[1].1.contains("bots"));
        assert!(s.excluded[2].1.contains("skipped"));
        assert!(s.excluded[3].1.contains("full"));
    }

    #[test]
    fn leaving_each_inner_step_out_predicts_it_from_the_others() {
        let line = points(&[(1, 0.06), (10, 0.15), (20, 0.25), (40, 0.45), (80, 0.85)]);
        let loo = leave_one_out(&line);
        assert_eq!(loo.iter().map(|l| l.0).collect::<Vec<_>>(), [10, 20, 40]);
        assert!(loo.iter().all(|l| (l.1 - 1.0).abs() < 1e-9), "{loo:?}");
        // The step at 20 measured 25% high: the others' line predicts it 20% low.
        let mut off = line.clone();
        off[2].cpu = 0.3125;
        let loo = leave_one_out(&off);
        assert!((loo[1].1 - 0.8).abs() < 1e-9, "{loo:?}");
        assert!(leave_one_out(&line[..3]).is_empty());
    }

    #[test]
    fn the_median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn the_check_runs_between_the_two_largest_steps() {
        let fit = Fit::new(&points(&[(1, 0.06), (10, 0.15), (20, 0.25)])).unwrap();
        assert_eq!(check_matches(&fit), 15);
        let fit = Fit::new(&points(&[(1, 0.06), (2, 0.07)])).unwrap();
        assert_eq!(check_matches(&fit), 1);
        let fit = Fit::new(&points(&[(10, 0.15), (30, 0.35), (30, 0.36)])).unwrap();
        assert_eq!(check_matches(&fit), 20);
    }
}
