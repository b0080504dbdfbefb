//! Frame telemetry for tickforge: where each microsecond of a match frame goes.
//!
//! What it does: exclusive-time scopes over the ten categories of the VALORANT article
//! ([`Category`]) and the four phases of the Iris article ([`Phase`]), aggregation of frame
//! records into histograms ([`FrameStats`]), per-round history and budgets per category
//! ([`rounds`]), the report types every bench writes
//! ([`report`]), and the metrics a live server exposes to Prometheus ([`prometheus`]).
//!
//! What it does not do: read the OS clock or do any I/O. The clock is a plain function
//! handed in by the caller (`tickforge-io` provides the real one; tests pass a fake one), so
//! scope accounting is tested on virtual time.
//!
//! In order of importance: every nanosecond of a frame is charged to exactly one category
//! (the categories add up to the frame by construction); a scope costs two clock reads and
//! no allocation; the numbers are plain data a report can carry.

pub mod prometheus;
pub mod report;
pub mod rounds;
mod scopes;
mod stats;
pub mod summary;

pub use scopes::{Clock, FrameRecord, PhaseGuard, ScopeGuard, Scopes};
pub use stats::{DurationHistogram, FrameStats, SlowestFrames, SLOWEST_FRAMES};

/// The telemetry categories of VALORANT's server: every line of hot code runs in one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Category {
    /// Choosing, encoding and queueing what each connection is sent.
    Replication,
    /// Fog of war: what each client may see.
    Fow,
    /// Sockets, packet decoding, transport state and (later) encryption.
    Network,
    /// Server-side poses and hitbox placement.
    Animation,
    /// Rules: inputs, weapons, damage, rounds.
    Gameplay,
    /// Player movement (`pmove`).
    Movement,
    /// Weapons and other held items.
    Equippable,
    /// Character abilities and state.
    Character,
    /// Collision queries and traces outside movement.
    Physics,
    /// Anything not inside another scope.
    Other,
}

impl Category {
    /// Number of categories.
    pub const COUNT: usize = 10;
    /// All categories, in report order.
    pub const ALL: [Category; Category::COUNT] = [
        Category::Replication,
        Category::Fow,
        Category::Network,
        Category::Animation,
        Category::Gameplay,
        Category::Movement,
        Category::Equippable,
        Category::Character,
        Category::Physics,
        Category::Other,
    ];

    /// The report key of this category.
    pub const fn name(self) -> &'static str {
        match self {
            Category::Replication => "replication",
            Category::Fow => "fow",
            Category::Network => "network",
            Category::Animation => "animation",
            Category::Gameplay => "gameplay",
            Category::Movement => "movement",
            Category::Equippable => "equippable",
            Category::Character => "character",
            Category::Physics => "physics",
            Category::Other => "other",
        }
    }

    /// Index into per-category arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The four phases of a match frame, as the Iris article splits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Phase {
    /// Reading datagrams and decoding what they carry.
    Receive,
    /// Applying inputs and stepping the game.
    Simulate,
    /// Building what each connection is sent.
    Replicate,
    /// Handing datagrams to the kernel.
    Send,
}

impl Phase {
    /// Number of phases.
    pub const COUNT: usize = 4;
    /// All phases, in frame order.
    pub const ALL: [Phase; Phase::COUNT] = [
        Phase::Receive,
        Phase::Simulate,
        Phase::Replicate,
        Phase::Send,
    ];

    /// The report key of this phase.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Receive => "receive",
            Phase::Simulate => "simulate",
            Phase::Replicate => "replicate",
            Phase::Send => "send",
        }
    }

    /// Index into per-phase arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Frame budget in milliseconds for `games_per_core` matches at `tick_hz`, 10% kept for
/// the OS (DESIGN.md: 7.8125 ms ÷ 60 × 0.9 = 0.117 ms at 128 Hz).
pub fn budget_ms(tick_hz: u32, games_per_core: u32) -> f64 {
    1000.0 / f64::from(tick_hz) / f64::from(games_per_core) * 0.9
}

/// Players of the match the frame budget is for: VALORANT's 5-v-5.
pub const REFERENCE_PLAYERS: u32 = 10;

/// Frame budget of one match of `players` at `tick_hz`: [`budget_ms`] at the target games
/// per core for a match of up to [`REFERENCE_PLAYERS`], and as much again per ten players
/// beyond (a 100-player match is given ten matches' time), so that a large match within its
/// means is not counted a hitch on every tick.
pub fn match_budget_ms(tick_hz: u32, players: u32) -> f64 {
    let matches = f64::from(players.max(REFERENCE_PLAYERS)) / f64::from(REFERENCE_PLAYERS);
    budget_ms(tick_hz, TARGET_GAMES_PER_CORE) * matches
}

/// Games per core that a mean match frame cost allows at `tick_hz`, 10% kept for the OS.
pub fn projected_games_per_core(tick_hz: u32, mean_match_frame_ms: f64) -> Option<f64> {
    (mean_match_frame_ms > 0.0).then(|| 0.9 * 1000.0 / f64::from(tick_hz) / mean_match_frame_ms)
}

/// The number of matches per core tickforge is built to hold at 128 Hz.
pub const TARGET_GAMES_PER_CORE: u32 = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_matches_design() {
        // VALORANT: 3 games per core at 128 Hz is 2.34 ms.
        assert!((budget_ms(128, 3) - 2.34375).abs() < 1e-9);
        assert!((budget_ms(128, TARGET_GAMES_PER_CORE) - 0.1171875).abs() < 1e-9);
    }

    #[test]
    fn a_match_budget_grows_with_players_beyond_ten_only() {
        let ten = budget_ms(128, TARGET_GAMES_PER_CORE);
        assert_eq!(match_budget_ms(128, 1), ten);
        assert_eq!(match_budget_ms(128, 10), ten);
        assert!((match_budget_ms(128, 100) - 10.0 * ten).abs() < 1e-12);
        assert!((match_budget_ms(30, 20) - 2.0 * budget_ms(30, 60)).abs() < 1e-12);
    }

    #[test]
    fn projection_inverts_budget() {
        let p = projected_games_per_core(128, budget_ms(128, 60)).unwrap();
        assert!((p - 60.0).abs() < 1e-9);
        assert_eq!(projected_games_per_core(128, 0.0), None);
    }

    #[test]
    fn indices_are_dense_and_ordered() {
        for (i, c) in Category::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        for (i, p) in Phase::ALL.iter().enumerate() {
            assert_eq!(p.index(), i);
        }
    }
}
