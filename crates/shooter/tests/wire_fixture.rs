//! The writer's bytes, pinned: seeded multi-tick scenarios whose every snapshot body must
//! equal, byte for byte, the recording in `tests/fixtures/wire.bin`, and so must what each
//! write reported and the counters every 16 ticks.
//!
//! The fixture pins the wire format and everything that decides what goes into a
//! snapshot: relevancy, fog, hysteresis, priority order, budgets and rate, baselines and
//! their ring, loss judgement, gone records, encoding sharing. A change that means to
//! alter none of these (an optimisation) must leave the fixture as it is. A change that
//! means to alter the bytes re-records it on purpose, and says why, with:
//!
//! ```text
//! TICKFORGE_RECORD_WIRE=1 cargo test -p tickforge-shooter --test wire_fixture
//! ```
//!
//! which writes the file from the current code instead of comparing with it. The
//! scenarios use no transcendental functions of their own (positions are whole multiples
//! of 1/16 m from a seeded generator), so the recording depends only on the replicator;
//! the replicator's viewer direction goes through `f32::sin_cos`, from the platform's libm.
//!
//! The file is a sequence of entries, integers little-endian:
//!
//! ```text
//! b'n' len u8, name                               a scenario starts
//! b'w' tick u32, conn u16, states u16, full u16, gone u16, deferred u16,
//!      len u32, body                              one write (len: WriteInfo::bytes)
//! b's' tick u32, len u32, Debug(ReplicationStats) the counters after a tick
//! ```

mod common;

use common::Rng;
use tickforge_game::Vec3;
use tickforge_replication::{NetId, RateByDistance, ReplicationConfig, Replicator, Viewer};
use tickforge_shooter::{flags, position, push, schema, EntityState};

const FIXTURE: &str = "tests/fixtures/wire.bin";

/// One entry of the recording.
#[derive(Debug, PartialEq)]
enum Entry {
    Scenario(String),
    Write {
        tick: u32,
        conn: u16,
        /// states, full, gone, deferred
        info: [u16; 4],
        body: Vec<u8>,
    },
    Stats {
        tick: u32,
        text: String,
    },
}

impl Entry {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Entry::Scenario(name) => {
                out.push(b'n');
                out.push(name.len() as u8);
                out.extend_from_slice(name.as_bytes());
            }
            Entry::Write {
                tick,
                conn,
                info,
                body,
            } => {
                out.push(b'w');
                out.extend_from_slice(&tick.to_le_bytes());
                out.extend_from_slice(&conn.to_le_bytes());
                for v in info {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&(body.len() as u32).to_le_bytes());
                out.extend_from_slice(body);
            }
            Entry::Stats { tick, text } => {
                out.push(b's');
                out.extend_from_slice(&tick.to_le_bytes());
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
    }

    fn decode_all(mut b: &[u8]) -> Vec<Entry> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> &'a [u8] {
            let (head, rest) = b.split_at(n);
            *b = rest;
            head
        }
        let u16_ = |b: &mut &[u8]| u16::from_le_bytes(take(b, 2).try_into().unwrap());
        let u32_ = |b: &mut &[u8]| u32::from_le_bytes(take(b, 4).try_into().unwrap());
        let mut entries = Vec::new();
        while let Some((&tag, rest)) = b.split_first() {
            b = rest;
            entries.push(match tag {
                b'n' => {
                    let n = usize::from(take(&mut b, 1)[0]);
                    Entry::Scenario(String::from_utf8(take(&mut b, n).to_vec()).unwrap())
                }
                b'w' => {
                    let tick = u32_(&mut b);
                    let conn = u16_(&mut b);
                    let info = [u16_(&mut b), u16_(&mut b), u16_(&mut b), u16_(&mut b)];
                    let n = u32_(&mut b) as usize;
                    let body = take(&mut b, n).to_vec();
                    Entry::Write {
                        tick,
                        conn,
                        info,
                        body,
                    }
                }
                b's' => {
                    let tick = u32_(&mut b);
                    let n = u32_(&mut b) as usize;
                    let text = String::from_utf8(take(&mut b, n).to_vec()).unwrap();
                    Entry::Stats { tick, text }
                }
                _ => panic!("{FIXTURE}: unknown entry {tag}"),
            });
        }
        entries
    }
}

/// A moving entity: position and velocity in 1/16 m and 1/16 m/s steps.
#[derive(Clone, Copy)]
struct Mover {
    p: [i32; 3],
    v: [i32; 2],
    vz: i32,
    yaw: u16,
    pitch: i16,
    health: u8,
    weapon: u8,
    crouched: bool,
}

impl Mover {
    fn new(rng: &mut Rng, half_side_16ths: i32) -> Mover {
        let side = (2 * half_side_16ths + 1) as u64;
        Mover {
            p: [
                rng.below(side) as i32 - half_side_16ths,
                rng.below(side) as i32 - half_side_16ths,
                0,
            ],
            v: [0, 0],
            vz: 0,
            yaw: rng.next_u64() as u16,
            pitch: (rng.below(4000) as i16) - 2000,
            health: 100,
            weapon: 30,
            crouched: false,
        }
    }

    /// One tick: turn and change speed now and then, jump now and then, stay inside the
    /// square of half side `half_side_16ths`.
    fn step(&mut self, rng: &mut Rng, half_side_16ths: i32) {
        if rng.chance(0.08) {
            // Up to 7 m/s in 1/16 m/s steps.
            self.v = [rng.below(225) as i32 - 112, rng.below(225) as i32 - 112];
        }
        if self.p[2] == 0 && rng.chance(0.02) {
            self.vz = 110;
        }
        if self.p[2] > 0 || self.vz > 0 {
            self.vz -= 3;
        }
        for a in 0..2 {
            // A tick is 1/128 s: the position moves v / 128 (in 1/16 m), rounded down.
            self.p[a] += self.v[a].div_euclid(16);
            if self.p[a].abs() > half_side_16ths {
                self.p[a] = self.p[a].signum() * half_side_16ths;
                self.v[a] = -self.v[a];
            }
        }
        self.p[2] = (self.p[2] + self.vz.div_euclid(16)).max(0);
        if self.p[2] == 0 {
            self.vz = 0;
        }
        self.yaw = self.yaw.wrapping_add((rng.below(801) as i32 - 400) as u16);
        self.pitch = (self.pitch + rng.below(41) as i16 - 20).clamp(-16000, 16000);
        if rng.chance(0.01) {
            self.health = self.health.saturating_sub(rng.below(40) as u8);
        }
        if rng.chance(0.03) {
            self.weapon = self.weapon.checked_sub(1).unwrap_or(30);
        }
        if rng.chance(0.02) {
            self.crouched = !self.crouched;
        }
    }

    fn state(&self) -> EntityState {
        let m = |v: i32| v as f32 / 16.0;
        let mut f = flags::ALIVE;
        if self.p[2] == 0 {
            f |= flags::ON_GROUND;
        }
        if self.crouched {
            f |= flags::CROUCHED;
        }
        EntityState {
            position: Vec3::new(m(self.p[0]), m(self.p[1]), m(self.p[2])),
            velocity: Vec3::new(m(self.v[0]), m(self.v[1]), m(self.vz)),
            yaw: self.yaw,
            pitch: self.pitch,
            flags: f,
            health: self.health,
            weapon: self.weapon,
        }
    }
}

/// What a scenario does beyond moving its entities.
#[derive(Clone, Copy)]
struct Plan {
    name: &'static str,
    seed: u64,
    ticks: u32,
    config: ReplicationConfig,
    /// Entities that exist from the start; the rest of `max_entities` come and go.
    steady: usize,
    half_side_16ths: i32,
    /// Per write, chosen at random.
    budgets: &'static [usize],
    /// Chance an entity is fogged, per (connection, stretch of `fog_ticks`).
    fog: f64,
    fog_ticks: u32,
    ack_loss: f64,
    /// Acks arrive 1..=max_ack_delay ticks after the write, some much later.
    max_ack_delay: u64,
    /// Churn: removals, late set_entity, reconnects, skipped writes, wild acks.
    churn: bool,
}

/// Runs `plan` and appends its recording to `out`.
fn record(plan: &Plan, out: &mut Vec<Entry>) {
    let cfg = plan.config;
    let conns = cfg.max_connections;
    let mut rng = Rng(plan.seed);
    let mut r = Replicator::new(cfg, schema());
    let mut movers: Vec<Mover> = (0..cfg.max_entities)
        .map(|_| Mover::new(&mut rng, plan.half_side_16ths))
        .collect();
    let mut exists: Vec<bool> = (0..cfg.max_entities).map(|e| e < plan.steady).collect();
    // Connection c plays entity c; the last one, in a churning plan, is a spectator.
    let own = |c: usize| (!plan.churn || c + 1 < conns).then_some(NetId(c as u16));
    for c in 0..conns {
        r.connect(c, own(c));
    }
    let words = cfg.max_entities.div_ceil(64);
    let mut fog: Vec<Vec<u64>> = vec![vec![u64::MAX; words]; conns];
    // (tick the ack arrives, connection, acked tick)
    let mut acks: Vec<(u32, usize, u32)> = Vec::new();
    let mut body = Vec::with_capacity(1500);
    out.push(Entry::Scenario(plan.name.to_string()));
    for t in 0..plan.ticks {
        // The server hears acks before it starts the tick; a few come after.
        let mut late = Vec::new();
        acks.retain(|&(at, c, tick)| {
            if at > t {
                return true;
            }
            if plan.churn && rng.chance(0.1) {
                late.push((c, tick));
            } else {
                r.on_ack(c, tick);
            }
            false
        });
        if plan.churn && rng.chance(0.05) {
            // Never written, or not yet.
            let c = rng.below(conns as u64) as usize;
            r.on_ack(c, t + rng.below(3) as u32);
        }
        r.begin_tick(t);
        for (c, tick) in late {
            r.on_ack(c, tick);
        }
        if t % plan.fog_ticks == 0 {
            for row in &mut fog {
                row.fill(u64::MAX);
                for e in 0..cfg.max_entities {
                    if rng.chance(plan.fog) {
                        row[e / 64] &= !(1 << (e % 64));
                    }
                }
            }
        }
        for e in 0..cfg.max_entities {
            if plan.churn && e >= plan.steady && rng.chance(0.03) {
                exists[e] = !exists[e];
                if exists[e] {
                    movers[e] = Mover::new(&mut rng, plan.half_side_16ths);
                } else {
                    r.remove_entity(NetId(e as u16));
                }
            }
            if !exists[e] {
                continue;
            }
            movers[e].step(&mut rng, plan.half_side_16ths);
            // Standing still is not pushed again; now and then a moving one is not either.
            if movers[e].v != [0, 0] && !(plan.churn && rng.chance(0.05)) {
                push(&mut r, NetId(e as u16), &movers[e].state());
            }
        }
        if plan.churn && t == 40 {
            // A wild float lands in some cell and is never in anyone's range.
            let mut wild = movers[plan.steady - 1].state();
            wild.position = Vec3::new(f32::NAN, f32::INFINITY, 0.0);
            push(&mut r, NetId(plan.steady as u16 - 1), &wild);
        }
        if plan.churn && t == 90 {
            r.disconnect(2);
        }
        if plan.churn && t == 100 {
            r.connect(2, own(2));
        }
        if plan.churn && t == 150 {
            // A client that must be resynchronised.
            r.connect(1, own(1));
        }
        for (c, fog) in fog.iter().enumerate() {
            if plan.churn && rng.chance(0.03) {
                continue;
            }
            if plan.churn && rng.chance(0.05) {
                // Set after some connection's write: frozen for those already encoded.
                let e = rng.below(plan.steady as u64) as usize;
                movers[e].step(&mut rng, plan.half_side_16ths);
                push(&mut r, NetId(e as u16), &movers[e].state());
            }
            let seen_from = own(c).map_or(
                Viewer {
                    position: position(Vec3::new(0.0, 0.0, 0.0)),
                    yaw: 0,
                },
                |id| {
                    let s = movers[id.index()].state();
                    Viewer {
                        position: s.position(),
                        yaw: s.yaw,
                    }
                },
            );
            let budget = plan.budgets[rng.below(plan.budgets.len() as u64) as usize];
            body.clear();
            let info = r.write(c, &seen_from, Some(fog), budget, &mut body);
            assert_eq!(info.bytes, body.len());
            out.push(Entry::Write {
                tick: t,
                conn: c as u16,
                info: [info.states, info.full, info.gone, info.deferred],
                body: body.clone(),
            });
            if info.bytes == 0 || rng.chance(plan.ack_loss) {
                continue;
            }
            let delay = if rng.chance(0.02) {
                cfg.ring_ticks + 1
            } else {
                1 + rng.below(plan.max_ack_delay) as u32
            };
            acks.push((t + delay, c, t));
            if plan.churn && rng.chance(0.05) {
                acks.push((t + delay + 1, c, t));
            }
        }
        if t % 16 == 15 || t + 1 == plan.ticks {
            out.push(Entry::Stats {
                tick: t,
                text: format!("{:?}", r.stats()),
            });
        }
    }
}

fn plans() -> [Plan; 4] {
    let crowd = Plan {
        name: "crowd",
        seed: 3,
        ticks: 24,
        config: ReplicationConfig {
            max_entities: 80,
            max_connections: 4,
            ..ReplicationConfig::default()
        },
        steady: 80,
        half_side_16ths: 30 * 16,
        budgets: &[200, 350],
        fog: 0.0,
        fog_ticks: 32,
        ack_loss: 0.1,
        max_ack_delay: 4,
        churn: false,
    };
    [
        // The server's 10-player match: one entity and one connection per player.
        Plan {
            name: "arena",
            seed: 1,
            ticks: 64,
            config: ReplicationConfig {
                max_entities: 10,
                max_connections: 10,
                ..ReplicationConfig::default()
            },
            steady: 10,
            half_side_16ths: 40 * 16,
            budgets: &[1200],
            fog: 0.1,
            fog_ticks: 8,
            ack_loss: 0.05,
            max_ack_delay: 3,
            churn: false,
        },
        // Everything that changes who gets what: a small ring, a tight rate and budgets,
        // ranges with hysteresis, fog, removals, reconnects, lost, late and odd acks.
        Plan {
            name: "churn",
            seed: 2,
            ticks: 160,
            config: ReplicationConfig {
                max_entities: 70,
                max_connections: 6,
                ring_ticks: 12,
                cell_size_m: 8.0,
                relevant_radius_m: 24.0,
                hysteresis_ticks: 5,
                bytes_per_second: 128 * 60,
                burst_ticks: 3,
                ..ReplicationConfig::default()
            },
            steady: 55,
            half_side_16ths: 60 * 16,
            budgets: &[30, 120, 300, 1400],
            fog: 0.1,
            fog_ticks: 32,
            ack_loss: 0.2,
            max_ack_delay: 5,
            churn: true,
        },
        // A crowd that does not fit: priority order and deferral decide every packet.
        crowd,
        // The same crowd with a rate by distance: who waits for their tick, and what the
        // rest of the room takes.
        Plan {
            name: "crowd by distance",
            seed: 4,
            config: ReplicationConfig {
                rate_by_distance: RateByDistance {
                    halve_every_m: 8.0,
                    slowest_every_ticks: 4,
                },
                ..crowd.config
            },
            ..crowd
        },
    ]
}

fn recording() -> Vec<Entry> {
    let mut entries = Vec::new();
    for plan in &plans() {
        record(plan, &mut entries);
    }
    entries
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_snapshot_matches_the_recorded_bytes() {
    let got = recording();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    if std::env::var_os("TICKFORGE_RECORD_WIRE").is_some() {
        let mut bytes = Vec::new();
        for e in &got {
            e.encode(&mut bytes);
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; it is recorded with TICKFORGE_RECORD_WIRE=1 (see this file's doc)",
            path.display()
        )
    });
    let want = Entry::decode_all(&want);
    let mut scenario = "";
    for (g, w) in got.iter().zip(&want) {
        if let Entry::Scenario(name) = w {
            scenario = name;
        }
        match (g, w) {
            (
                Entry::Write {
                    tick,
                    conn,
                    info,
                    body,
                },
                Entry::Write {
                    info: want_info,
                    body: want_body,
                    ..
                },
            ) if g != w => panic!(
                "{scenario}: tick {tick} connection {conn}: the writer's bytes differ\n \
                 got {info:?} {}\nwant {want_info:?} {}",
                hex(body),
                hex(want_body),
            ),
            _ => assert_eq!(g, w, "{scenario}"),
        }
    }
    assert_eq!(got.len(), want.len(), "{FIXTURE}: entries");
}

/// The recording covers what it claims to: without this a scenario could drift into
/// writing nothing interesting and still match.
#[test]
fn the_scenarios_exercise_what_the_fixture_pins() {
    for plan in &plans() {
        let mut out = Vec::new();
        record(plan, &mut out);
        let Some(Entry::Stats { text: last, .. }) = out.last() else {
            panic!("{}: ends with its counters", plan.name);
        };
        let has = |what: &str| {
            let v: u64 = last
                .split(what)
                .nth(1)
                .and_then(|s| s.split([',', ' ']).nth(1))
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{what} in {last}"));
            v > 0
        };
        assert!(
            has("delta_records:") && has("cache_hits:") && has("packets_lost:"),
            "{}: {last}",
            plan.name
        );
        match plan.name {
            "churn" => assert!(
                has("gone_records:") && has("rate_limited:") && has("deferred:"),
                "{last}"
            ),
            "crowd" => assert!(has("deferred:"), "{last}"),
            "crowd by distance" => assert!(has("deferred:") && has("waiting:"), "{last}"),
            _ => {}
        }
        let mut kinds = [0u32; 4];
        for e in &out {
            if let Entry::Write { body, .. } = e {
                record_kinds(body, &mut kinds);
            }
        }
        // Delta, delta against another baseline, full, gone: the crowd has no fog.
        assert!(
            kinds[..3].iter().all(|&k| k > 0) && (kinds[3] > 0) == (plan.fog > 0.0),
            "{}: record kinds {kinds:?}",
            plan.name
        );
    }
}

/// Counts the records of each kind (delta, delta against another baseline, full, gone) in
/// a snapshot body, stepping over their fields by the layout drawn in `src/delta.rs`.
fn record_kinds(body: &[u8], kinds: &mut [u32; 4]) {
    if body.is_empty() {
        return;
    }
    let mut at = 5;
    let varint = |at: &mut usize| {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = body[*at];
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    let count = varint(&mut at);
    for _ in 0..count {
        let h = varint(&mut at);
        let (kind, follows, mask) = if h & 1 == 0 {
            (0, false, h >> 1)
        } else {
            (h >> 1 & 3, h & 8 != 0, h >> 4)
        };
        kinds[kind as usize] += 1;
        if follows {
            varint(&mut at);
        }
        if kind == 1 {
            at += 1;
        }
        for bit in 0..8 {
            if mask >> bit & 1 != 0 {
                if bit < 5 {
                    varint(&mut at);
                } else {
                    at += 1;
                }
            }
        }
    }
    assert_eq!(at, body.len(), "the records end with the body");
}
