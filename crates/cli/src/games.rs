//! The games the `tickforge` binary hosts.

/// Registers the built-in games with the server runtime; the first is the default.
pub fn register() {
    tickforge_server::games::register::<tickforge_shooter::Shooter>();
    tickforge_server::games::register::<tickforge_ctf::Ctf>();
}

pub use tickforge_server::games::parser;

/// `tickforge serve` with the reference shooter's flags beside the runtime's: each sets the
/// `[game]` key of its name (the runtime's `serve` knows no game's keys).
#[derive(clap::Args, Debug)]
pub struct ServeCmd {
    #[command(flatten)]
    pub serve: tickforge_server::serve::ServeArgs,
    #[command(flatten)]
    pub shooter: ShooterFlags,
}

/// The shooter's `[game]` keys as flags.
#[derive(clap::Args, Debug)]
pub struct ShooterFlags {
    /// The built-in map every match is played on: arena (5-v-5) or flat2km (2 km
    /// square, 100 spawns on an 800 m circle, for the crowd) [default: arena].
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "Shooter (the [game] table's keys)"
    )]
    pub map: Option<String>,
    /// Seconds of each round's buy phase, players held at their spawns [default: 15].
    #[arg(
        long,
        value_name = "S",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub buy_s: Option<f64>,
    /// Seconds of each round's combat phase [default: 100].
    #[arg(
        long,
        value_name = "S",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub round_s: Option<f64>,
    /// Seconds of the pause after each round [default: 5].
    #[arg(
        long,
        value_name = "S",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub round_end_s: Option<f64>,
    /// Rounds in a match, first to a majority wins [default: 5].
    #[arg(
        long,
        value_name = "N",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub rounds: Option<u8>,
    /// Each player's health at the start of a round, hit points [default: 100].
    #[arg(
        long,
        value_name = "HP",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub max_health_hp: Option<u16>,
    /// Pose players every Nth tick and lerp between when a shot rewinds; 1 poses every
    /// tick [default: 4].
    #[arg(
        long,
        value_name = "N",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub pose_every: Option<u8>,
    /// Trace each enemy pair's line of sight every Nth tick for the fog of war; 1 traces
    /// every tick [default: 4].
    #[arg(
        long,
        value_name = "N",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub fow_every: Option<u8>,
    /// Milliseconds lag compensation rewinds at most (hard cap 1000) [default: 200].
    #[arg(
        long,
        value_name = "MS",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub max_rewind_ms: Option<u32>,
    /// Send a player half as often for each further this many metres from a client, down
    /// to one tick in `--rate-slowest-every-ticks` [default: 50].
    #[arg(
        long,
        value_name = "M",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub rate_halves_every_m: Option<f64>,
    /// The rate by distance's slowest: one tick in N (1, 2, 4, 8 or 16); 1 sends every
    /// relevant player every tick, room allowing [default: 1].
    #[arg(
        long,
        value_name = "N",
        help_heading = "Shooter (the [game] table\'s keys)"
    )]
    pub rate_slowest_every_ticks: Option<u32>,
}

impl ServeCmd {
    /// The runtime's arguments, the shooter's flags added to `--game-set` (ahead of it, so
    /// an explicit `--game-set` of the same key wins).
    pub fn into_args(self) -> tickforge_server::serve::ServeArgs {
        use serde_json::Value;
        let f = self.shooter;
        let mut args = self.serve;
        let mut set: Vec<(String, Value)> = [
            ("map", f.map.map(Value::from)),
            ("buy_s", f.buy_s.map(Value::from)),
            ("round_s", f.round_s.map(Value::from)),
            ("round_end_s", f.round_end_s.map(Value::from)),
            ("rounds", f.rounds.map(Value::from)),
            ("max_health_hp", f.max_health_hp.map(Value::from)),
            ("pose_every", f.pose_every.map(Value::from)),
            ("fow_every", f.fow_every.map(Value::from)),
            ("max_rewind_ms", f.max_rewind_ms.map(Value::from)),
            (
                "rate_halves_every_m",
                f.rate_halves_every_m.map(Value::from),
            ),
            (
                "rate_slowest_every_ticks",
                f.rate_slowest_every_ticks.map(Value::from),
            ),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v?)))
        .collect();
        set.append(&mut args.game_set);
        args.game_set = set;
        args
    }
}
