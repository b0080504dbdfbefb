//! `tickforge replay FILE`: play a recorded match's inputs offline to its end state.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use tickforge_game::replay;
use tickforge_telemetry::Scopes;

/// Flags of `replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// An action file written by `serve --record-dir`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

pub fn run(args: ReplayArgs) -> Result<()> {
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let started = std::time::Instant::now();
    let outcome = replay::replay(&bytes, &Scopes::new(tickforge_io::time::now))
        .with_context(|| format!("replaying {}", args.file.display()))?;
    println!(
        "tickforge replay: {} inputs over {} ticks in {:.2} s; end state {} (hash {:016x})",
        outcome.inputs,
        outcome.end_tick.0,
        started.elapsed().as_secs_f64(),
        if outcome.is_identical() {
            "identical"
        } else {
            "DIFFERENT"
        },
        outcome.replayed_hash,
    );
    if let Some(r) = &outcome.result {
        println!(
            "  result: {} round(s), attackers {} – defenders {}, {}",
            r.rounds_played,
            r.score.attackers,
            r.score.defenders,
            r.winner().map_or("a draw", |t| t.as_str())
        );
        for p in &r.players {
            println!(
                "    player {} {}: {} kills, {} deaths, {} damage",
                p.slot.0,
                p.team.as_str(),
                p.stats.kills,
                p.stats.deaths,
                p.stats.damage_dealt_hp
            );
        }
    }
    if !outcome.is_identical() {
        bail!(
            "the replay ended at hash {:016x}, the recording at {:016x}",
            outcome.replayed_hash,
            outcome.recorded_hash
        );
    }
    Ok(())
}
