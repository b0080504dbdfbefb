//! `tickforge token`: mint connect tokens for a match from the private key, or make a key.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use base64::Engine;
use clap::Args;
use tickforge_io::entropy;
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::PrivateKey;
use tickforge_proto::user_data::{UserData, ANY, ANY_SEAT};
use tickforge_proto::MatchId;
use tickforge_server::config::{DEFAULT_PROTOCOL_ID, KEY_ENV};

/// Flags of `token`.
#[derive(Args, Debug)]
pub struct TokenArgs {
    /// Write a new random private key (64 hex digits, mode 0600) to FILE and exit.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["server", "out"])]
    pub generate_key: Option<PathBuf>,
    /// File holding the private key [default: the TICKFORGE_PRIVATE_KEY environment variable].
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Server address the token is good for; repeat for fallbacks (1 to 32).
    #[arg(long, value_name = "ADDR", required_unless_present = "generate_key")]
    pub server: Vec<SocketAddr>,
    /// The match the token places its holder in.
    #[arg(long = "match", value_name = "ID", default_value_t = 1)]
    pub match_id: u32,
    /// The player's team [default: any].
    #[arg(long)]
    pub team: Option<u8>,
    /// The player's seat in the match [default: any free seat].
    #[arg(long)]
    pub slot: Option<u16>,
    /// The client's id, unique per connected player [default: random].
    #[arg(long)]
    pub client_id: Option<u64>,
    /// Seconds until the token expires; negative: never.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 30,
        allow_negative_numbers = true
    )]
    pub expire_s: i64,
    /// Seconds of silence before the connection times out.
    #[arg(long, value_name = "S", default_value_t = 5)]
    pub timeout_s: i32,
    /// Protocol id, decimal or hex with 0x [default: 8388345093885489767].
    #[arg(long, value_name = "ID", value_parser = tickforge_server::config::parse_protocol_id)]
    pub protocol_id: Option<u64>,
    /// Write the 2048-byte token to FILE instead of printing it as base64.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Reads the private key from `path`, or else from the environment.
pub fn load_key(path: Option<&Path>) -> Result<PrivateKey> {
    match path {
        Some(p) => {
            if let Some(warning) = tickforge_server::config::key_file_warning(p) {
                eprintln!("tickforge: warning: {warning}");
            }
            Ok(tickforge_server::config::read_key_file(p)?)
        }
        None => match std::env::var(KEY_ENV) {
            Ok(text) => PrivateKey::from_hex(&text).context(KEY_ENV),
            Err(_) => bail!(
                "no private key: pass --key-file FILE (64 hex digits) or set {KEY_ENV}; \
                 make one with `tickforge token --generate-key FILE`"
            ),
        },
    }
}

/// Writes a new random key to `path`, readable by its owner only (mode 0600 on Unix; on
/// Windows the file takes its directory's ACL, which a user's profile keeps private).
pub fn write_new_key(path: &Path) -> Result<()> {
    let key = PrivateKey(entropy::random_bytes());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options
        .open(path)
        .with_context(|| format!("creating {} (it must not exist yet)", path.display()))?;
    writeln!(f, "{}", key.to_hex())?;
    Ok(())
}

pub fn run(args: TokenArgs) -> Result<()> {
    if let Some(path) = &args.generate_key {
        write_new_key(path)?;
        eprintln!(
            "tickforge token: wrote a new private key to {}",
            path.display()
        );
        return Ok(());
    }
    if args.server.is_empty() || args.server.len() > 32 {
        bail!(
            "--server: expected 1 to 32 server addresses, got {}",
            args.server.len()
        );
    }
    if args.match_id == 0 {
        bail!("--match: expected a match id of 1 or more");
    }
    let key = load_key(args.key_file.as_deref())?;
    let params = TokenParams {
        protocol_id: args.protocol_id.unwrap_or(DEFAULT_PROTOCOL_ID),
        create_timestamp: entropy::unix_now(),
        expire_seconds: args.expire_s,
        timeout_seconds: args.timeout_s,
        server_addresses: args.server.clone(),
    };
    let user_data = UserData {
        match_id: MatchId(args.match_id),
        team: args.team.unwrap_or(ANY),
        seat: args.slot.unwrap_or(ANY_SEAT),
    };
    let client_id = args
        .client_id
        .unwrap_or_else(|| u64::from_le_bytes(entropy::random_bytes()));
    let token = ConnectToken::mint(
        &params,
        client_id,
        &user_data.encode(),
        &key.0,
        &entropy::random_bytes(),
    );
    let bytes = token.to_bytes();
    match &args.out {
        Some(path) => {
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "tickforge token: client {client_id} for match {} on {} server(s), expires {}, written to {}",
                args.match_id,
                args.server.len(),
                if args.expire_s < 0 { "never".to_string() } else { format!("in {} s", args.expire_s) },
                path.display()
            );
        }
        None => println!(
            "{}",
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        ),
    }
    Ok(())
}
