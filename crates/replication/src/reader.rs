//! The client side: rebuilds the replicated world from snapshot bodies.
//!
//! Every snapshot's records are kept for `history_ticks`, whatever order snapshots arrive
//! in, because the server may encode against any tick the client acked. The view is
//! newest-wins per entity: a record changes an entity's view only if its snapshot is newer
//! than the last one that changed that entity, so a late snapshot never moves anything back
//! in time, yet still fills in what it alone carries. An entity's state as of an earlier
//! tick ([`Replica::entity_as_of`], for interpolation) follows its own records back.
//!
//! A snapshot is decoded whole into scratch storage before anything is committed: one that
//! fails changes nothing.

use std::mem::MaybeUninit;

use crate::bits::{prefetch, BitRow, Ids};
use crate::delta::{
    apply_raw, read_raw, split_head, Base, Cursor, FieldError, Rate, KIND_DELTA_BACK,
    KIND_DELTA_DEFAULT, KIND_FULL, KIND_GONE,
};
use crate::schema::{Lanes, Schema};
use crate::state::{NetId, MAX_ENTITIES};
use crate::writer::ReplicationConfig;
use tickforge_sim::hint::{prefetch_item, prefetch_lines};

/// Entities of a replica whose whole view [`Replica::prefetch_next`] hints: a small match.
const HINTED_VIEW: usize = 16;

/// Tunables of a [`Replica`]; they must agree with the server's [`ReplicationConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// Entity ids are `0..max_entities`, at most [`MAX_ENTITIES`]; the server's value.
    pub max_entities: usize,
    /// Ticks of decoded states kept per entity. At least the server's `ring_ticks`, plus
    /// the ticks a snapshot may arrive late by.
    pub history_ticks: u32,
    /// The server's tick rate, ticks per second: deltas predict positions with it.
    pub tick_hz: u32,
}

impl ReplicaConfig {
    /// The reader matching a server configured with `server`: twice its ring of history,
    /// so a snapshot reordered by up to a ring still finds its baselines.
    pub fn matching(server: &ReplicationConfig) -> ReplicaConfig {
        ReplicaConfig {
            max_entities: server.max_entities,
            history_ticks: 2 * server.ring_ticks,
            tick_hz: server.tick_hz,
        }
    }
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig::matching(&ReplicationConfig::default())
    }
}

/// A snapshot body that was refused; the replica is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Shorter than its records say.
    #[error("snapshot truncated")]
    Truncated,
    /// Bytes left over after the last record.
    #[error("snapshot has trailing bytes")]
    TrailingBytes,
    /// A varint longer than its field allows.
    #[error("snapshot varint overlong")]
    Overlong,
    /// More records than entities.
    #[error("snapshot has too many records")]
    TooManyRecords,
    /// An entity id at or past `max_entities`.
    #[error("snapshot entity id out of range")]
    IdOutOfRange,
    /// A record head with mask bits past the schema's fields, or a gone record with
    /// fields.
    #[error("snapshot record head invalid")]
    BadHead,
    /// A delta whose baseline distance is 0 or reaches before tick 0.
    #[error("snapshot baseline distance invalid")]
    BadBack,
    /// A delta against a state this replica does not hold (evicted, or never decoded).
    #[error("snapshot baseline not held")]
    MissingBaseline,
}

impl From<FieldError> for ReadError {
    fn from(e: FieldError) -> Self {
        match e {
            FieldError::Truncated => ReadError::Truncated,
            FieldError::Overlong => ReadError::Overlong,
        }
    }
}

/// What one [`Replica::read`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadInfo {
    /// The snapshot's tick.
    pub tick: u32,
    /// Entity states it carried.
    pub states: u16,
    /// Gone records it carried.
    pub gone: u16,
    /// Older than the newest snapshot read: its states were stored as baselines, and
    /// changed the view only of entities nothing newer had changed.
    pub stale: bool,
    /// Already read: nothing was done.
    pub duplicate: bool,
}

/// Counters since the replica was made or reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Snapshots decoded and committed.
    pub snapshots: u64,
    /// Of which older than the newest already read.
    pub stale: u64,
    /// Snapshots read again, and ignored.
    pub duplicates: u64,
    /// Snapshots dropped because a baseline was not held.
    pub missing_baseline: u64,
    /// Snapshots dropped as malformed.
    pub malformed: u64,
}

/// Marks a record with no earlier record of its entity held.
const NO_PREV: u16 = u16::MAX;

/// Baseline ticks besides the default whose place a snapshot's read keeps.
const OTHER_BASELINES: usize = 8;

/// Ids of a baseline slot whose lines are loaded before it is searched: 8 lines.
const IDS_PREFETCHED: usize = 256;

/// Records reserved per slot at the start; a slot grows to the largest snapshot it holds.
const RESERVED_RECORDS: usize = 64;

/// Gives `v` room for `n` items in all, and writes that room once (with zeros, which
/// nothing reads: pushes overwrite it), so that its pages are in memory before anything is
/// pushed. The first write to a page costs the kernel's zeroing it, and in a virtual
/// machine the host's backing it too.
fn reserve_written<T: Copy>(v: &mut Vec<T>, n: usize) {
    v.reserve_exact(n.saturating_sub(v.len()));
    let spare = v.spare_capacity_mut();
    spare.fill(MaybeUninit::zeroed());
    std::hint::black_box(spare);
}

/// Where one stored record sits: its snapshot's tick and its index among that snapshot's
/// records. Valid while the snapshot's slot still holds that tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link {
    tick: u32,
    index: u16,
}

/// An entity's newest record, what the view shows, and the links to its newest stored
/// records: two cache lines, the first all that [`Replica::entity_as_of`] reads of it
/// for a past tick.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Shown {
    present: bool,
    updated: bool,
    /// Gone, and still listed ([`Replica::listed`]) until its gone record is
    /// `history_ticks` old.
    departed: bool,
    tick: u32,
    recent: Recent,
    state: Lanes,
}

const _: () = assert!(std::mem::size_of::<Shown>() == 128);

impl Shown {
    /// The newest record in its snapshot's slot; `None` when it was not stored there.
    /// Stored, it is the newest link; an entity has one record a tick, so a newest link of
    /// another tick is an older record.
    fn stored(&self) -> Option<Link> {
        let link = (self.recent.len > 0).then(|| self.recent.get(0))?;
        (link.tick == self.tick).then_some(link)
    }
}

/// An entity's record evicted from the slots while it was the newest stored of its
/// entity: its state as of that tick holds until the entity's next record, however long
/// ago that tick was. A record evicted with a newer one of its entity held is not kept: a
/// tick older than the history, between two records, is not asked about (and is `None`).
#[derive(Clone, Copy, Debug, Default)]
struct Floor {
    known: bool,
    present: bool,
    tick: u32,
    state: Lanes,
}

/// One stored record: a state, or a gone record (`present` false).
#[derive(Clone, Copy, Debug)]
struct Record {
    present: bool,
    /// The index of this entity's previous record held, in the slot of `prev_tick`;
    /// [`NO_PREV`] for none.
    prev_index: u16,
    prev_tick: u32,
    q: Lanes,
}

impl Record {
    fn prev(&self) -> Option<Link> {
        (self.prev_index != NO_PREV).then_some(Link {
            tick: self.prev_tick,
            index: self.prev_index,
        })
    }
}

/// Records of an entity whose links its [`Recent`] keeps: as many as fit beside the
/// view's header in its first line.
const RECENT: usize = 9;

/// Links to an entity's newest stored records, newest first: [`Replica::entity_as_of`]
/// finds the record at or before a recent tick here, in one line, instead of walking the
/// records' own links back one miss at a time. They are the newest `len` the entity's
/// chain holds, with none skipped, so where they end the chain goes on from the last.
/// A link is valid while its slot holds its tick.
#[derive(Clone, Copy, Debug)]
struct Recent {
    ticks: [u32; RECENT],
    index: [u16; RECENT],
    len: u8,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            ticks: [0; RECENT],
            index: [0; RECENT],
            len: 0,
        }
    }
}

impl Recent {
    fn get(&self, k: usize) -> Link {
        Link {
            tick: self.ticks[k],
            index: self.index[k],
        }
    }

    /// The newest link at or before `tick`, if these hold one.
    fn at_or_before(&self, tick: u32) -> Option<Link> {
        let k = (self.ticks[..usize::from(self.len)].iter()).position(|&t| t <= tick)?;
        Some(self.get(k))
    }

    /// Puts `link` in its place by tick (newer than the last, or room left), dropping the
    /// oldest when full.
    fn insert(&mut self, link: Link) {
        let len = usize::from(self.len);
        if len == 0 || link.tick > self.ticks[0] {
            // The usual case, the entity's newest record: a shift by one of fixed length
            // (a few vector moves; a shift of `len` calls memmove). What moves past `len`
            // is never read.
            let (ticks, index) = (self.ticks, self.index);
            self.ticks[1..].copy_from_slice(&ticks[..RECENT - 1]);
            self.index[1..].copy_from_slice(&index[..RECENT - 1]);
            self.ticks[0] = link.tick;
            self.index[0] = link.index;
            self.len = (len + 1).min(RECENT) as u8;
            return;
        }
        let at = self.ticks[..len]
            .iter()
            .position(|&t| t < link.tick)
            .unwrap_or(len);
        if at == RECENT {
            return;
        }
        let end = len.min(RECENT - 1);
        self.ticks.copy_within(at..end, at + 1);
        self.index.copy_within(at..end, at + 1);
        self.ticks[at] = link.tick;
        self.index[at] = link.index;
        self.len = (end + 1) as u8;
    }
}

/// One snapshot's records, lowest id first: `records[i]` is entity `ids[i]`'s.
#[derive(Debug, Default)]
struct Slot {
    tick: Option<u32>,
    ids: Vec<u16>,
    records: Vec<Record>,
    /// Bit `i`: `records[i]` is the newest stored record of its entity, to be kept as its
    /// [`Floor`] when evicted. In a fight nearly every entity is sent again within the
    /// history, so eviction reads none of the records it drops. Its first 256 bits are in
    /// the slot, where its tick is read: storing a snapshot and evicting one touch no other
    /// line for them.
    newest: BitRow,
}

impl Slot {
    /// Where entity `id`'s record of exactly `tick` sits in this slot (if it holds that
    /// tick and the entity): a baseline, whose lines the caller starts loading.
    ///
    /// `from` is where in the tick's slot to start looking: a snapshot's records come
    /// lowest id first, and so do a slot's, so a reader that keeps `from` for one baseline
    /// tick (`walk`) walks that slot once per snapshot, a merge of the two id lists, rather
    /// than searching it per record. Otherwise the slot is searched. `from` is moved past
    /// `id`'s place.
    fn find(&self, id: usize, tick: u32, from: &mut usize, walk: bool) -> Option<usize> {
        if self.tick != Some(tick) {
            return None;
        }
        let id = id as u16;
        let rest = self.ids.get(*from..).unwrap_or_default();
        let found = if walk {
            rest.iter().position(|&x| x >= id).unwrap_or(rest.len())
        } else {
            rest.partition_point(|&x| x < id)
        };
        let i = *from + found;
        *from = i;
        if self.ids.get(i) != Some(&id) {
            return None;
        }
        *from = i + 1;
        Some(i)
    }

    /// Starts loading the slot's ids (up to [`IDS_PREFETCHED`] of them), which a baseline's
    /// search reads: all their lines at once, rather than one miss per probe.
    fn prefetch_ids(&self) {
        let ids = &self.ids[..self.ids.len().min(IDS_PREFETCHED)];
        for line in ids.chunks(32) {
            prefetch(line.as_ptr());
        }
        if let Some(last) = ids.last() {
            prefetch(last);
        }
    }

    /// Stores `record` for entity `id` (past the slot's others); `newest` when it is the
    /// newest stored record of its entity.
    fn push(&mut self, id: u16, record: Record, newest: bool) -> u16 {
        let index = self.records.len();
        self.newest.set(index, newest);
        self.ids.push(id);
        self.records.push(record);
        index as u16
    }

    /// Room for `records` records, written once ([`reserve_written`]).
    fn reserve(&mut self, records: usize) {
        reserve_written(&mut self.ids, records);
        reserve_written(&mut self.records, records);
    }

    /// Empties the slot.
    fn clear(&mut self) {
        self.tick = None;
        self.ids.clear();
        self.records.clear();
        self.newest.reset();
    }
}

#[derive(Clone, Copy, Debug)]
struct Decoded {
    id: u16,
    gone: bool,
    q: Lanes,
}

/// The slot of the history that holds `tick`, of `history_ticks` slots.
fn slot_index(tick: u32, history_ticks: u32) -> usize {
    (tick % history_ticks) as usize
}

/// One record of a snapshot as its first pass reads it: what it is and where its baseline
/// is stored (a delta's). Its fields, as the wire holds them, are in the scratch; the second
/// pass applies them against the baseline.
#[derive(Clone, Copy, Debug)]
struct Parsed {
    id: u16,
    kind: u8,
    /// Ticks back to the baseline (a delta's).
    back: u8,
    mask: u16,
    /// The baseline record's index in the slot `base_slot`, both set once found; unused
    /// when the baseline is the entity's newest record (`in_view`).
    base_index: u16,
    /// The baseline is the entity's newest record, whose state the view holds: its record
    /// is not read.
    in_view: bool,
    base_slot: u32,
}

impl Parsed {
    /// A delta: [`Replica::find_baselines`] looks for its baseline.
    fn is_delta(&self) -> bool {
        matches!(u32::from(self.kind), KIND_DELTA_DEFAULT | KIND_DELTA_BACK)
    }

    /// The baseline a delta points at, once found: its state, and whether it is present
    /// (a delta against a gone record is refused).
    fn base<'s>(&self, slots: &'s [Slot], view: &'s [Shown]) -> (&'s Lanes, bool) {
        if self.in_view {
            let v = &view[usize::from(self.id)];
            (&v.state, v.present)
        } else {
            let r = &slots[self.base_slot as usize].records[usize::from(self.base_index)];
            (&r.q, r.present)
        }
    }
}

/// A client's copy of the replicated world, rebuilt from snapshot bodies. Performs no I/O.
///
/// Storage grows with what was sent, not with the world: a slot per tick of
/// `history_ticks` holds that tick's snapshot's records (baselines for later deltas), and
/// each record links to its entity's previous one, so [`Replica::entity_as_of`] walks back
/// only through the entity's own records. Per entity, only the newest record and the
/// newest one evicted are kept outside the slots.
pub struct Replica {
    config: ReplicaConfig,
    schema: &'static Schema,
    /// The server's tick rate, as the position prediction divides by it.
    rate: Rate,
    slots: Vec<Slot>,
    view: Vec<Shown>,
    floor: Vec<Floor>,
    /// Bit `id`: entity `id` is present in the view, or departed.
    listed: Vec<u64>,
    /// The departed entities, in no order.
    departed: Vec<u16>,
    newest: Option<u32>,
    /// A snapshot's records as its first pass read them.
    parsed: Vec<Parsed>,
    scratch: Vec<Decoded>,
    stats: ReplicaStats,
}

impl Replica {
    /// An empty replica decoding the fields of `schema`, the server's. Memory: about
    /// `max_entities × 200` bytes, plus 74 bytes per record the last `history_ticks`
    /// snapshots carried (up to twice that: a slot's room grows by doubling, to the largest
    /// snapshot it held, and is kept). A slot reserves `min(max_entities, 64)` records, so
    /// once snapshots stop growing nothing allocates.
    ///
    /// # Panics
    /// If `max_entities` is not 1..=[`MAX_ENTITIES`] or `history_ticks` or `tick_hz` is 0.
    pub fn new(config: ReplicaConfig, schema: &'static Schema) -> Replica {
        assert!(
            (1..=MAX_ENTITIES).contains(&config.max_entities)
                && config.history_ticks > 0
                && config.tick_hz > 0,
            "replica config: max_entities 1..=4096, history_ticks and tick_hz at least 1"
        );
        let reserve = config.max_entities.min(RESERVED_RECORDS);
        Replica {
            config,
            schema,
            rate: Rate::new(config.tick_hz),
            slots: (0..config.history_ticks)
                .map(|_| Slot {
                    tick: None,
                    ids: Vec::with_capacity(reserve),
                    records: Vec::with_capacity(reserve),
                    newest: BitRow::default(),
                })
                .collect(),
            view: vec![Shown::default(); config.max_entities],
            floor: vec![Floor::default(); config.max_entities],
            listed: vec![0; config.max_entities.div_ceil(64)],
            departed: Vec::with_capacity(config.max_entities),
            newest: None,
            parsed: Vec::with_capacity(reserve),
            scratch: Vec::with_capacity(reserve),
            stats: ReplicaStats::default(),
        }
    }

    /// Gives every slot room for snapshots of up to `records` entities (at most
    /// `max_entities`; a slot never has less than it had), and writes all of the replica's
    /// memory once. Neither allocating nor the pages' first touch is then left for the
    /// snapshots: up to that size, reading allocates nothing and faults no page in.
    /// Memory: 74 bytes a record, in each of the `history_ticks` slots. For a client that
    /// makes its replica before its frames are timed, as the bots do before their schedule
    /// starts: at a thousand bots, the kernel zeroing their replicas' pages as their first
    /// snapshots came in put them over a second behind it.
    pub fn reserve(&mut self, records: usize) {
        let records = records.min(self.config.max_entities);
        for s in &mut self.slots {
            s.reserve(records);
        }
        reserve_written(&mut self.parsed, records);
        reserve_written(&mut self.scratch, records);
        reserve_written(&mut self.departed, self.config.max_entities);
    }

    /// Records the slots have room for, in all, 74 bytes each: a slot stores a snapshot of
    /// up to its share without allocating ([`Replica::reserve`]).
    pub fn room(&self) -> usize {
        self.slots.iter().map(|s| s.records.capacity()).sum()
    }

    /// Forgets everything, as for a new connection (the server's `connect`).
    pub fn reset(&mut self) {
        for s in &mut self.slots {
            s.clear();
        }
        self.view.fill(Shown::default());
        self.floor.fill(Floor::default());
        self.listed.fill(0);
        self.departed.clear();
        self.newest = None;
        self.stats = ReplicaStats::default();
    }

    /// Decodes one snapshot body and applies it. On error nothing changes and the error
    /// is counted; a duplicate is `Ok` with [`ReadInfo::duplicate`] set.
    pub fn read(&mut self, body: &[u8]) -> Result<ReadInfo, ReadError> {
        match self.decode(body) {
            Ok(info) => Ok(info),
            Err(e) => {
                self.scratch.clear();
                if e == ReadError::MissingBaseline {
                    self.stats.missing_baseline += 1;
                } else {
                    self.stats.malformed += 1;
                }
                Err(e)
            }
        }
    }

    fn slot_of(&self, tick: u32) -> usize {
        slot_index(tick, self.config.history_ticks)
    }

    /// The record `link` (a link of entity `id`'s) points at, if its slot still holds it.
    ///
    /// A slot's records are written once, when its tick is stored, and cleared only when a
    /// newer tick takes the slot, which never holds that tick again: so a slot holding the
    /// link's tick holds the very record linked, and its id need not be read (a miss).
    fn record(&self, id: usize, link: Link) -> Option<&Record> {
        let slot = &self.slots[self.slot_of(link.tick)];
        let i = usize::from(link.index);
        debug_assert!(slot.tick != Some(link.tick) || slot.ids.get(i) == Some(&(id as u16)));
        slot.records.get(i).filter(|_| slot.tick == Some(link.tick))
    }

    /// Reads a body in two passes. The first reads the records' heads and their fields as
    /// the wire holds them (checking them), starting each entity's view lines; then finds
    /// each delta's baseline, in the view (an entity's newest record) or in its slot (its
    /// record then started): the lines, scattered over the view and the history, load
    /// together rather than one miss after another. The second applies the fields against
    /// the baselines, without parsing a byte again. The refusals are those of one pass in
    /// record order: a delta whose baseline is not held, or a gone record, is refused
    /// before anything a later record (or its own fields) holds.
    fn decode(&mut self, body: &[u8]) -> Result<ReadInfo, ReadError> {
        let mut r = Cursor::new(body);
        let tick = r.u32_le()?;
        let default_back = r.u8()?;
        let count = r.varint(16)? as usize;
        if count > self.config.max_entities {
            return Err(ReadError::TooManyRecords);
        }
        if count > r.remaining() {
            return Err(ReadError::Truncated);
        }
        let at = self.slot_of(tick);
        self.scratch.clear();
        if self.slots[at].tick == Some(tick) {
            self.stats.duplicates += 1;
            return Ok(ReadInfo {
                tick,
                duplicate: true,
                ..ReadInfo::default()
            });
        }
        let parsed = self.parse(&mut r, tick, default_back, count);
        // The baselines of the records read, even of a snapshot refused: a missing one
        // (not held, or a gone record) is the refusal, before anything a later record (or
        // the record's own fields) holds.
        let found = self.find_baselines(tick, default_back);
        let mut info = match (parsed, found) {
            (Ok(info), Ok(())) => info,
            (_, Err(e)) => return Err(e),
            (Err(e), Ok(())) => {
                let (slots, view) = (&self.slots, &self.view);
                let gone_base =
                    (self.parsed.iter()).any(|p| p.is_delta() && !p.base(slots, view).1);
                return Err(if gone_base {
                    ReadError::MissingBaseline
                } else {
                    e
                });
            }
        };
        info.tick = tick;

        let Replica {
            schema,
            rate,
            slots,
            view,
            parsed,
            scratch,
            ..
        } = self;
        for (p, d) in parsed.iter().zip(scratch.iter_mut()) {
            if d.gone {
                continue;
            }
            let base = if !p.is_delta() {
                Base::Zero
            } else {
                let (state, present) = p.base(slots, view);
                if !present {
                    return Err(ReadError::MissingBaseline);
                }
                Base::Delta {
                    state,
                    back: u32::from(p.back),
                    rate: *rate,
                }
            };
            // Applied where it is kept (the count bounds the scratch's length).
            let raw = d.q;
            apply_raw(schema, base, p.mask, &raw, &mut d.q);
        }
        self.commit(tick);
        info.stale = self.newest.is_some_and(|n| n > tick);
        self.newest = Some(self.newest.map_or(tick, |n| n.max(tick)));
        self.unlist_departed();
        self.stats.snapshots += 1;
        self.stats.stale += u64::from(info.stale);
        Ok(info)
    }

    /// [`Replica::decode`]'s first pass over the `count` records that `r` is at: into
    /// `parsed`, each record's head (a delta's ticks back, its baseline not yet found), its
    /// view lines started; into `scratch`, its fields as the wire holds them. On an error,
    /// `parsed` holds the records read up to it, the failing one's head included once read.
    fn parse(
        &mut self,
        r: &mut Cursor<'_>,
        tick: u32,
        default_back: u8,
        count: usize,
    ) -> Result<ReadInfo, ReadError> {
        let schema = self.schema;
        let (fields, head_bits) = (schema.len(), schema.head_bits());
        self.parsed.clear();
        let mut next_id = 0usize;
        let mut info = ReadInfo::default();
        if let Some(base) = tick.checked_sub(u32::from(default_back)) {
            self.slots[self.slot_of(base)].prefetch_ids();
        }
        for _ in 0..count {
            let (kind, id_follows, mask) =
                split_head(r.varint(head_bits)?, fields).ok_or(ReadError::BadHead)?;
            let gap = if id_follows {
                r.varint(16)? as usize
            } else {
                0
            };
            let id = next_id + gap;
            if id >= self.config.max_entities {
                return Err(ReadError::IdOutOfRange);
            }
            next_id = id + 1;
            // Its view lines, which the baseline's search reads and the commit updates: a
            // snapshot's entities are scattered over the view, and a process holding many
            // replicas (a bots process) finds them cold, so they are all started here,
            // their misses overlapped, and read once every record is.
            prefetch_item(&self.view[id]);
            let mut p = Parsed {
                id: id as u16,
                kind: kind as u8,
                back: 0,
                mask,
                base_index: 0,
                in_view: false,
                base_slot: 0,
            };
            match kind {
                KIND_GONE => {
                    if mask != 0 {
                        return Err(ReadError::BadHead);
                    }
                    info.gone += 1;
                    self.parsed.push(p);
                    self.scratch.push(Decoded {
                        id: p.id,
                        gone: true,
                        q: Lanes::ZERO,
                    });
                    continue;
                }
                KIND_FULL => {}
                KIND_DELTA_DEFAULT | KIND_DELTA_BACK => {
                    let back = if kind == KIND_DELTA_BACK {
                        r.u8()?
                    } else {
                        default_back
                    };
                    if back == 0 || tick < u32::from(back) {
                        return Err(ReadError::BadBack);
                    }
                    p.back = back;
                }
                _ => unreachable!("a two-bit kind"),
            }
            self.parsed.push(p);
            // The fields as the wire holds them, into the lanes the second pass applies
            // them in.
            self.scratch.push(Decoded {
                id: p.id,
                gone: false,
                q: Lanes::ZERO,
            });
            let raw = &mut self.scratch.last_mut().expect("just pushed").q;
            read_raw(schema, mask, r, raw)?;
            info.states += 1;
        }
        if r.remaining() != 0 {
            return Err(ReadError::TrailingBytes);
        }
        Ok(info)
    }

    /// [`Replica::decode`]'s search for the baselines of the deltas `parse` read, of the
    /// snapshot of `tick`, in record order: `MissingBaseline` at the first not held. Most
    /// often a delta's baseline is its entity's newest record (the server encodes against
    /// the newest snapshot the client acknowledged that carried it), whose state the view
    /// holds, in the lines `parse` started: its record is not read. Otherwise it is looked
    /// up in its slot, and its record started loading.
    fn find_baselines(&mut self, tick: u32, default_back: u8) -> Result<(), ReadError> {
        // Where the default baseline's slot was last looked in, and a few others' (by
        // tick): the records come lowest id first, so each place only moves on. A baseline
        // tick met first is searched for; then its slot is walked from there.
        let mut default_from = 0usize;
        let mut others = [(0u32, 0usize); OTHER_BASELINES];
        let mut other_count = 0usize;
        let history = self.config.history_ticks;
        let Replica {
            slots,
            view,
            parsed,
            ..
        } = self;
        for p in parsed.iter_mut().filter(|p| p.is_delta()) {
            // `parse` checked it is a tick of this run.
            let base_tick = tick - u32::from(p.back);
            let s = slot_index(base_tick, history);
            let slot = &slots[s];
            let id = usize::from(p.id);
            let newest_is_base = view[id].stored().is_some_and(|l| l.tick == base_tick);
            if newest_is_base && slot.tick == Some(base_tick) {
                p.in_view = true;
                continue;
            }
            let known = others[..other_count]
                .iter()
                .position(|&(t, _)| t == base_tick);
            let index = if p.back == default_back {
                slot.find(id, base_tick, &mut default_from, true)
            } else if let Some(k) = known {
                slot.find(id, base_tick, &mut others[k].1, true)
            } else {
                slot.prefetch_ids();
                let mut from = 0;
                let index = slot.find(id, base_tick, &mut from, false);
                if other_count < OTHER_BASELINES {
                    others[other_count] = (base_tick, from);
                    other_count += 1;
                }
                index
            }
            .ok_or(ReadError::MissingBaseline)?;
            prefetch_item(&slot.records[index]);
            p.base_slot = s as u32;
            p.base_index = index as u16;
        }
        Ok(())
    }

    /// Applies the decoded snapshot of `tick`: stores its records in the tick's slot
    /// (unless the slot holds a newer tick, likelier a baseline), links each to its
    /// entity's records before and after it, and updates the view.
    fn commit(&mut self, tick: u32) {
        let at = self.slot_of(tick);
        let store = self.slots[at].tick.is_none_or(|held| held < tick);
        if store {
            self.evict(at);
            self.slots[at].tick = Some(tick);
        }
        for i in 0..self.scratch.len() {
            let d = self.scratch[i];
            let id = usize::from(d.id);
            // The view's entry is updated in place, not copied out and back whole.
            let v = &self.view[id];
            let (updated, head) = (v.updated, v.stored());
            let newest = !updated || tick > v.tick;
            // The entity's newest stored record until now, which a newer one supersedes.
            let last = (v.recent.len > 0).then(|| v.recent.get(0));
            let mut stored = None;
            if store {
                let (prev, next) = if newest {
                    (head.filter(|_| updated), None)
                } else {
                    // Late: linked in between; across a broken chain, to nothing.
                    self.walk_back(id, head, tick).unwrap_or((None, None))
                };
                let record = Record {
                    present: !d.gone,
                    prev_index: prev.map_or(NO_PREV, |p| p.index),
                    prev_tick: prev.map_or(0, |p| p.tick),
                    q: d.q,
                };
                let newest_stored = last.is_none_or(|l| tick > l.tick);
                let index = self.slots[at].push(d.id, record, newest_stored);
                if let Some(l) = last.filter(|_| newest_stored) {
                    let held_at = self.slot_of(l.tick);
                    let s = &mut self.slots[held_at];
                    if s.tick == Some(l.tick) {
                        s.newest.clear(usize::from(l.index));
                    }
                }
                let link = Link { tick, index };
                if let Some(n) = next {
                    let next_slot = self.slot_of(n.tick);
                    let r = &mut self.slots[next_slot].records[usize::from(n.index)];
                    r.prev_index = index;
                    r.prev_tick = tick;
                }
                stored = Some(link);
            }
            let listed = self.listed[id / 64] & 1 << (id % 64) != 0;
            if !d.gone {
                self.listed[id / 64] |= 1 << (id % 64);
            }
            let v = &mut self.view[id];
            if let Some(link) = stored {
                v.recent.insert(link);
            }
            if newest {
                v.present = !d.gone;
                v.updated = true;
                v.departed &= d.gone;
                v.tick = tick;
                v.state = d.q;
            }
            // Listed, yet gone in the view: departed (a late present record counts too).
            if !v.present && !v.departed && (listed || !d.gone) {
                v.departed = true;
                self.departed.push(d.id);
            }
        }
    }

    /// Unlists the departed whose gone record is `history_ticks` old, or who came back.
    fn unlist_departed(&mut self) {
        let Some(newest) = self.newest else {
            return;
        };
        let keep = self.config.history_ticks;
        let (view, listed) = (&mut self.view, &mut self.listed);
        self.departed.retain(|&id| {
            let i = usize::from(id);
            let v = &mut view[i];
            let stays = v.departed && newest - v.tick < keep;
            if !stays {
                if v.departed {
                    listed[i / 64] &= !(1 << (i % 64));
                }
                v.departed = false;
            }
            stays
        });
    }

    /// Every entity that may be present as of a tick within `history_ticks` of the newest,
    /// lowest id first: those in view, and those whose gone record is newer than that.
    /// Costs a word per 64 entities plus one step per entity listed: a client that reads
    /// players as of a past tick ([`Replica::entity_as_of`]) need not ask about the rest.
    pub fn listed(&self) -> Ids<'_> {
        Ids::new(&self.listed)
    }

    /// Walks entity `id`'s stored records back from `head` (its newest, newer than
    /// `tick`): the newest at or before `tick` (`None` when the chain ends first) and the
    /// one after it. `None` when the chain breaks at a record no longer held before then.
    fn walk_back(
        &self,
        id: usize,
        head: Option<Link>,
        tick: u32,
    ) -> Option<(Option<Link>, Option<Link>)> {
        let (mut at, mut after) = (head, None);
        while let Some(link) = at {
            if link.tick <= tick {
                return Some((Some(link), after));
            }
            at = self.record(id, link)?.prev();
            after = Some(link);
        }
        Some((None, after))
    }

    /// Empties slot `at`, keeping each record it held that was the newest stored of its
    /// entity as that entity's floor.
    fn evict(&mut self, at: usize) {
        let slot = &mut self.slots[at];
        if let Some(tick) = slot.tick {
            for i in slot.newest.ones() {
                let (r, f) = (&slot.records[i], &mut self.floor[usize::from(slot.ids[i])]);
                if !f.known || f.tick < tick {
                    *f = Floor {
                        known: true,
                        present: r.present,
                        tick,
                        state: r.q,
                    };
                }
            }
        }
        slot.clear();
    }

    /// Entity `id`'s lanes as of snapshot tick `tick`: from its newest record at or before
    /// `tick` (an entity a snapshot did not carry keeps its state, as the server meant).
    /// `None` when that record is a gone record, or when there is none: the entity was
    /// never carried by then, or its record then is no longer held (its newest record
    /// evicted before `tick` is always held). Reads the entity's few newest links in one
    /// line; past them, takes one step per older record of the entity after `tick`.
    pub fn entity_as_of(&self, id: NetId, tick: u32) -> Option<Lanes> {
        let i = id.index();
        let v = self.view.get(i)?;
        if !v.updated {
            return None;
        }
        if v.tick <= tick {
            return v.present.then_some(v.state);
        }
        let recent = &v.recent;
        let len = usize::from(recent.len);
        let link = match recent.at_or_before(tick) {
            Some(link) => link,
            // Older than every recent link: the chain goes on from the oldest.
            None if len == RECENT => self
                .record(i, recent.get(len - 1))
                .and_then(|r| self.walk_back(i, r.prev(), tick))
                .and_then(|(at, _)| at)?,
            // The recent links are every record stored: none is that old.
            None => return None,
        };
        if let Some(r) = self.record(i, link) {
            return r.present.then_some(r.q);
        }
        // Evicted: held as the floor if it was the entity's newest stored.
        let f = &self.floor[i];
        (f.known && f.tick == link.tick && f.present).then_some(f.state)
    }

    /// Starts loading what [`Replica::read`] first touches of the snapshot after the
    /// newest read (the slot it goes to: its tick, and the bits naming the records its
    /// eviction keeps) and, for a small match, every entity's view entry it updates: a
    /// hint, which changes nothing. A
    /// process holding hundreds of replicas (a bots process) finds each one cold.
    pub fn prefetch_next(&self) {
        if let Some(at) = self.next_slot() {
            prefetch_item(&self.slots[at]);
        }
        if self.view.len() <= HINTED_VIEW {
            prefetch_lines(&self.view[..]);
        }
    }

    /// The slot the snapshot after the newest read goes to; `None` before the first.
    fn next_slot(&self) -> Option<usize> {
        self.newest.map(|n| self.slot_of(n.wrapping_add(1)))
    }

    /// Starts loading what [`Replica::entity_as_of`] reads first of entity `id`: a hint,
    /// which changes nothing. A client reading many entities as of past ticks (every
    /// player of a crowd, interpolated) gives it a few entities ahead of the one it reads,
    /// so that their misses overlap rather than come one after another.
    pub fn prefetch_entity(&self, id: NetId) {
        if let Some(v) = self.view.get(id.index()) {
            prefetch(v);
        }
    }

    /// Starts loading what [`Replica::entity`] reads of entity `id` (both its view lines):
    /// a hint, which changes nothing, for a client reading many entities' newest states
    /// (a bot ranking a crowd's players by distance), given a few entities ahead.
    pub fn prefetch_newest(&self, id: NetId) {
        if let Some(v) = self.view.get(id.index()) {
            prefetch_item(v);
        }
    }

    /// Starts loading the record [`Replica::entity_as_of`] reads for entity `id` as of
    /// `tick`, when its links are at hand: a hint, given after
    /// [`Replica::prefetch_entity`] and before the read.
    pub fn prefetch_as_of(&self, id: NetId, tick: u32) {
        let i = id.index();
        let Some(v) = self.view.get(i) else {
            return;
        };
        if !v.updated || v.tick <= tick {
            return;
        }
        if let Some(link) = v.recent.at_or_before(tick) {
            let slot = &self.slots[self.slot_of(link.tick)];
            if let Some(r) = slot.records.get(usize::from(link.index)) {
                prefetch_item(r);
            }
        }
    }

    /// What the last successful [`Replica::read`] decoded, lowest id first: each entity it
    /// carried, with its lanes at that snapshot's tick, or `None` for a gone record. Empty
    /// after a duplicate or an error. For clients that keep their own per-tick history
    /// (interpolation, lag-compensation checks) rather than the newest-wins view.
    pub fn last_read(&self) -> impl Iterator<Item = (NetId, Option<Lanes>)> + '_ {
        self.scratch
            .iter()
            .map(|d| (NetId(d.id), (!d.gone).then_some(d.q)))
    }

    /// The entities in view and their lanes, lowest id first.
    pub fn entities(&self) -> impl Iterator<Item = (NetId, Lanes)> + '_ {
        self.view
            .iter()
            .enumerate()
            .filter(|(_, v)| v.present)
            .map(|(i, v)| (NetId(i as u16), v.state))
    }

    /// Entity `id`'s lanes, if in view.
    pub fn entity(&self, id: NetId) -> Option<Lanes> {
        self.view
            .get(id.index())
            .filter(|v| v.present)
            .map(|v| v.state)
    }

    /// The tick of entity `id`'s last update (state or gone record), if any.
    pub fn entity_tick(&self, id: NetId) -> Option<u32> {
        self.view
            .get(id.index())
            .filter(|v| v.updated)
            .map(|v| v.tick)
    }

    /// The newest snapshot tick read.
    pub fn newest_tick(&self) -> Option<u32> {
        self.newest
    }

    /// Counters since [`Replica::new`] or [`Replica::reset`].
    pub fn stats(&self) -> ReplicaStats {
        self.stats
    }

    /// The configuration this replica was made with.
    pub fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    /// The schema this replica decodes with.
    pub fn schema(&self) -> &'static Schema {
        self.schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::Viewer;
    use crate::schema::test_schema::SHOOTER_LIKE;
    use crate::state::Position;
    use crate::writer::Replicator;
    use proptest::prelude::*;

    fn config() -> ReplicationConfig {
        ReplicationConfig {
            max_entities: 8,
            max_connections: 1,
            ..ReplicationConfig::default()
        }
    }

    /// Running along x at 9 m/s, turning: lanes vx vy px py yaw of [`SHOOTER_LIKE`].
    fn state(t: u32) -> Lanes {
        let mut q = Lanes::ZERO;
        q.0[..5].copy_from_slice(&[
            9 * 256,
            0,
            (t as f32 * 0.07 * 256.0).round() as i32,
            256,
            (t as i32 * 300 / 16) & 0xfff,
        ]);
        q
    }

    fn new_replica() -> Replica {
        Replica::new(ReplicaConfig::matching(&config()), &SHOOTER_LIKE)
    }

    /// Snapshot bodies of ticks `0..n` for entities 0 and 3; `(t, a)` in `acks` acks tick
    /// `a` before tick `t` is written.
    fn bodies(n: u32, acks: &[(u32, u32)]) -> Vec<Vec<u8>> {
        let mut r = Replicator::new(config(), &SHOOTER_LIKE);
        r.connect(0, None);
        (0..n)
            .map(|t| {
                r.begin_tick(t);
                r.set_entity(NetId(0), Position::default(), &state(t));
                r.set_entity(NetId(3), Position::default(), &state(t + 100));
                for &(_, a) in acks.iter().filter(|&&(at, _)| at == t) {
                    r.on_ack(0, a);
                }
                let mut body = Vec::new();
                r.write(0, &Viewer::default(), None, 1400, &mut body);
                body
            })
            .collect()
    }

    #[test]
    fn a_late_snapshot_is_stored_as_a_baseline_without_moving_the_view_back() {
        // 2 is encoded against 0 (1 not yet acked), 3 against 1.
        let b = bodies(4, &[(1, 0), (3, 1)]);
        let mut replica = new_replica();
        replica.read(&b[0]).unwrap();
        replica.read(&b[2]).unwrap();
        let late = replica.read(&b[1]).unwrap();
        assert!(late.stale && !late.duplicate);
        assert_eq!(replica.entity(NetId(0)), Some(state(2)), "newest wins");
        assert_eq!(replica.newest_tick(), Some(2));
        replica.read(&b[3]).unwrap();
        assert_eq!(replica.entity(NetId(3)), Some(state(103)));
        assert!(replica.read(&b[3]).unwrap().duplicate);
        let s = replica.stats();
        assert_eq!((s.snapshots, s.stale, s.duplicates), (4, 1, 1));
    }

    #[test]
    fn the_slot_hinted_for_the_next_snapshot_is_the_one_it_is_stored_in() {
        let b = bodies(40, &[(1, 0), (3, 1)]);
        let mut replica = new_replica();
        assert_eq!(replica.next_slot(), None);
        replica.prefetch_next();
        for (t, body) in b.iter().enumerate() {
            let hinted = replica.next_slot();
            replica.prefetch_next();
            replica.read(body).unwrap();
            if t > 0 {
                let at = hinted.expect("a snapshot was read");
                assert_eq!(replica.slots[at].tick, Some(t as u32), "tick {t}");
            }
        }
    }

    #[test]
    fn a_reserved_replica_reads_snapshots_of_that_size_in_the_room_it_made() {
        let config = ReplicationConfig {
            max_entities: 80,
            max_connections: 1,
            ..ReplicationConfig::default()
        };
        let mut w = Replicator::new(config, &SHOOTER_LIKE);
        w.connect(0, None);
        let mut replica = Replica::new(ReplicaConfig::matching(&config), &SHOOTER_LIKE);
        // More than the match's entities is no more room than they need.
        replica.reserve(10_000);
        assert_eq!(replica.room(), 80 * replica.slots.len());
        let room = |r: &Replica| -> Vec<(*const Record, usize, *const u16)> {
            (r.slots.iter())
                .map(|s| (s.records.as_ptr(), s.records.capacity(), s.ids.as_ptr()))
                .collect()
        };
        let before = room(&replica);
        assert!(before.iter().all(|&(_, c, _)| (80..10_000).contains(&c)));
        let mut body = Vec::new();
        for t in 0..2 * config.ring_ticks {
            w.begin_tick(t);
            for id in 0..80 {
                w.set_entity(NetId(id), Position::default(), &state(t + u32::from(id)));
            }
            if t > 0 {
                w.on_ack(0, t - 1);
            }
            body.clear();
            w.write(0, &Viewer::default(), None, 16_384, &mut body);
            assert_eq!(replica.read(&body).unwrap().states, 80, "tick {t}");
        }
        assert_eq!(
            replica.entity(NetId(79)),
            Some(state(2 * config.ring_ticks - 1 + 79))
        );
        assert_eq!(room(&replica), before, "no slot grew or moved");
        // Less than it has leaves it as it is.
        replica.reserve(8);
        assert_eq!(room(&replica), before);
    }

    #[test]
    fn a_missing_baseline_drops_the_snapshot_whole() {
        let b = bodies(2, &[(1, 0)]);
        let mut replica = new_replica();
        assert_eq!(replica.read(&b[1]), Err(ReadError::MissingBaseline));
        assert_eq!(replica.entities().count(), 0);
        assert_eq!(replica.newest_tick(), None);
        assert_eq!(replica.stats().missing_baseline, 1);
        replica.read(&b[0]).unwrap();
        replica.read(&b[1]).unwrap();
        assert_eq!(replica.entities().count(), 2);
    }

    #[test]
    fn hostile_records_are_refused_with_their_reason() {
        let mut replica = new_replica();
        let head = |tick: u32, back: u8, count: u8| {
            let mut v = tick.to_le_bytes().to_vec();
            v.extend([back, count]);
            v
        };
        let cases: [(Vec<u8>, ReadError); 10] = [
            (vec![1, 0, 0], ReadError::Truncated),
            (
                [head(5, 0, 9), vec![3; 9]].concat(),
                ReadError::TooManyRecords,
            ),
            ([head(5, 0, 2), vec![3]].concat(), ReadError::Truncated),
            ([head(5, 0, 0), vec![0]].concat(), ReadError::TrailingBytes),
            // Gone (head 7) for id 0, then gone with an id gap (15) of 7: id 8 of 8.
            (
                [head(5, 0, 2), vec![7, 15, 7]].concat(),
                ReadError::IdOutOfRange,
            ),
            // Gone with a mask bit; a common head with mask bit 8, past the table.
            (
                [head(5, 0, 1), vec![7 | 1 << 4]].concat(),
                ReadError::BadHead,
            ),
            (
                [head(5, 0, 1), vec![0x80, 0x04]].concat(),
                ReadError::BadHead,
            ),
            (
                [head(5, 0, 1), vec![0x80, 0x80, 0x01]].concat(),
                ReadError::Overlong,
            ),
            // A delta against the default baseline where there is none; back 6 from tick 5.
            ([head(5, 0, 1), vec![0]].concat(), ReadError::BadBack),
            ([head(5, 0, 1), vec![3, 6]].concat(), ReadError::BadBack),
        ];
        for (body, want) in cases {
            assert_eq!(replica.read(&body), Err(want), "{body:?}");
        }
        assert_eq!(replica.stats().malformed, 10);
        assert_eq!(
            replica.read(&[head(5, 2, 1), vec![0]].concat()),
            Err(ReadError::MissingBaseline)
        );
        assert_eq!(replica.entities().count(), 0);
    }

    /// A delta against a gone record is refused for its baseline, before anything later in
    /// the body is looked at: its own fields, later records, bytes after the last.
    #[test]
    fn a_delta_against_a_gone_record_is_a_missing_baseline_whatever_follows() {
        let mut replica = new_replica();
        // Tick 1: entity 0 gone (head 7).
        let gone = [1u32.to_le_bytes().to_vec(), vec![0, 1, 7]].concat();
        assert_eq!(replica.read(&gone).map(|i| i.gone), Ok(1));
        // Tick 2, default baseline one back; entity 0 as a delta: unchanged (head 0), or
        // with a field (head 2) whose bytes are missing.
        let tick_2 = |count: u8, records: &[u8]| {
            [
                2u32.to_le_bytes().to_vec(),
                vec![1, count],
                records.to_vec(),
            ]
            .concat()
        };
        let cases = [
            // Then a record whose head is cut short.
            tick_2(2, &[0, 0x80]),
            // Then a record with a gap past the entities.
            tick_2(2, &[0, 15, 100]),
            tick_2(1, &[2]),
            tick_2(1, &[0, 9]),
        ];
        for body in &cases {
            assert_eq!(
                replica.read(body),
                Err(ReadError::MissingBaseline),
                "{body:?}"
            );
        }
        assert_eq!(replica.stats().missing_baseline, cases.len() as u64);
        assert_eq!(replica.stats().malformed, 0);
        // A body refused for what it holds alone still says so.
        assert_eq!(
            replica.read(&tick_2(1, &[7, 9])),
            Err(ReadError::TrailingBytes)
        );
    }

    /// A replica that read tick 0 of [`bodies`] (entities 0 and 3), then ticks `1..end` of
    /// another writer, which never had them: entity 0 on every tick, entity 3 (as
    /// `state(t + 100)`) on the ticks `three` picks.
    fn read_after_tick_0(end: u32, three: impl Fn(u32) -> bool) -> Replica {
        let mut replica = new_replica();
        replica.read(&bodies(1, &[])[0]).unwrap();
        let mut r = Replicator::new(config(), &SHOOTER_LIKE);
        r.connect(0, None);
        for t in 1..end {
            r.begin_tick(t);
            r.set_entity(NetId(0), Position::default(), &state(t));
            if three(t) {
                r.set_entity(NetId(3), Position::default(), &state(t + 100));
            }
            let mut body = Vec::new();
            r.write(0, &Viewer::default(), None, 1400, &mut body);
            replica.read(&body).unwrap();
            r.on_ack(0, t);
        }
        replica
    }

    #[test]
    fn an_entity_not_sent_for_longer_than_the_history_keeps_its_state_as_of_any_tick() {
        // Entity 3 is carried once, by tick 0; then another writer, which never had it,
        // carries entity 0 alone. 300 ticks evict tick 0's slot several times over.
        let replica = read_after_tick_0(300, |_| false);
        let history = replica.config().history_ticks;
        assert!(300 > 2 * history);
        assert_eq!(replica.entity_tick(NetId(3)), Some(0), "sent once");
        for t in [0u32, 150, 290, 299, 5000] {
            assert_eq!(replica.entity_as_of(NetId(3), t), Some(state(100)), "{t}");
        }
        // The moving one, as of each tick still held, and clamped to the newest past it.
        for t in 300 - history..300 {
            assert_eq!(replica.entity_as_of(NetId(0), t), Some(state(t)), "{t}");
        }
        assert_eq!(replica.entity_as_of(NetId(0), 900), Some(state(299)));
        assert_eq!(replica.entity_as_of(NetId(5), 299), None, "never carried");
    }

    #[test]
    fn a_tick_between_two_evicted_records_is_none_not_an_older_floor() {
        // Entity 3 is carried by tick 0, evicted as its newest (its floor), then carried
        // again on every tick from 200: its records of 200.. are evicted while newer ones
        // are held, and are not kept. The floor, tick 0's, is older than their ticks.
        let history = new_replica().config().history_ticks;
        let end = 200 + 2 * history;
        let replica = read_after_tick_0(end, |t| t >= 200);
        let oldest_held = end - history;
        for t in [200, 250, oldest_held - 1] {
            assert_eq!(replica.entity_as_of(NetId(3), t), None, "as of {t}");
        }
        // Before 200 the floor's is the state, if the replica finds it at all.
        for t in [0, 150, 199] {
            let got = replica.entity_as_of(NetId(3), t);
            assert!(
                got.is_none() || got == Some(state(100)),
                "as of {t}: {got:?}"
            );
        }
        for t in oldest_held..end {
            assert_eq!(
                replica.entity_as_of(NetId(3), t),
                Some(state(t + 100)),
                "{t}"
            );
        }
    }

    #[test]
    fn a_departed_entity_stays_listed_for_the_history_then_is_unlisted() {
        let mut w = Replicator::new(config(), &SHOOTER_LIKE);
        w.connect(0, None);
        let mut replica = new_replica();
        let history = replica.config().history_ticks;
        let listed = |r: &Replica| r.listed().map(|i| i.0).collect::<Vec<_>>();
        for t in 0..200 {
            w.begin_tick(t);
            w.set_entity(NetId(0), Position::default(), &state(t));
            match t {
                0..10 | 120.. => w.set_entity(NetId(5), Position::default(), &state(t)),
                _ => w.remove_entity(NetId(5)),
            }
            let mut body = Vec::new();
            w.write(0, &Viewer::default(), None, 1400, &mut body);
            replica.read(&body).unwrap();
            w.on_ack(0, t);
            let gone_at = 10;
            let want: &[u16] = match t {
                _ if t < gone_at + history || t >= 120 => &[0, 5],
                _ => &[0],
            };
            assert_eq!(listed(&replica), want, "tick {t}");
            if t == gone_at + 3 {
                assert_eq!(replica.entity(NetId(5)), None);
                assert_eq!(replica.entity_as_of(NetId(5), gone_at - 1), Some(state(9)));
            }
        }
    }

    /// One entity's records as a client that read `read` would hold them: for each
    /// snapshot read successfully, in any order, the records it carried.
    type Model = Vec<Vec<(u32, Option<Lanes>)>>;

    fn model_as_of(model: &Model, id: usize, tick: u32) -> Option<Lanes> {
        model[id]
            .iter()
            .filter(|(t, _)| *t <= tick)
            .max_by_key(|(t, _)| *t)
            .and_then(|(_, q)| *q)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Snapshots written under a tight byte budget (so entities are deferred), with
        /// entities leaving and coming back, delivered out of order by up to 6 ticks with
        /// some lost: after each read, every entity as of every tick of the last 40 is the
        /// newest record at or before that tick among the snapshots read.
        #[test]
        fn an_entity_as_of_a_tick_is_its_newest_record_read_at_or_before_it(
            budget in 12usize..120,
            moving in prop::collection::vec(any::<bool>(), 8),
            leaves in prop::collection::vec((0u32..200, 0usize..8, 1u32..30), 0..6),
            delays in prop::collection::vec(0u32..7, 200),
            lost in prop::collection::vec(any::<bool>(), 200),
        ) {
            let mut w = Replicator::new(config(), &SHOOTER_LIKE);
            w.connect(0, None);
            let mut written = Vec::new();
            for t in 0..200u32 {
                w.begin_tick(t);
                for (e, &m) in moving.iter().enumerate() {
                    let away = leaves.iter().any(|&(from, who, len)| who == e && (from..from + len).contains(&t));
                    if away {
                        w.remove_entity(NetId(e as u16));
                    } else {
                        let at = if m { t } else { 7 };
                        w.set_entity(NetId(e as u16), Position::default(), &state(at + 1000 * e as u32));
                    }
                }
                let mut body = Vec::new();
                w.write(0, &Viewer::default(), None, budget, &mut body);
                // Acked when it would have arrived: the writer picks baselines from acks.
                let arrives = t + delays[t as usize];
                written.push((arrives, t, body));
                for &(a, tick, _) in written.iter().map(|x| (x.0, x.1, ())).collect::<Vec<_>>().iter() {
                    if a == t && !lost[tick as usize] {
                        w.on_ack(0, tick);
                    }
                }
            }
            written.sort_by_key(|(arrives, tick, _)| (*arrives, *tick));
            let mut replica = new_replica();
            let mut model: Model = vec![Vec::new(); 8];
            for (_, tick, body) in &written {
                if lost[*tick as usize] || body.is_empty() {
                    continue;
                }
                if replica.read(body).is_err() {
                    continue;
                }
                for (id, q) in replica.last_read() {
                    model[id.index()].push((*tick, q));
                }
                let newest = replica.newest_tick().unwrap();
                let listed: Vec<usize> = replica.listed().map(|i| i.index()).collect();
                prop_assert!(listed.windows(2).all(|w| w[0] < w[1]));
                for id in 0..8 {
                    let shown = (newest.saturating_sub(40)..=newest)
                        .any(|t| model_as_of(&model, id, t).is_some());
                    prop_assert!(!shown || listed.contains(&id), "{} not listed", id);
                    for t in newest.saturating_sub(40)..=newest + 1 {
                        prop_assert_eq!(
                            replica.entity_as_of(NetId(id as u16), t),
                            model_as_of(&model, id, t),
                            "entity {} as of {} (newest {})", id, t, newest
                        );
                    }
                    // Older, a record may no longer be held; one that is, is the right one.
                    for t in 0..newest.saturating_sub(40) {
                        let got = replica.entity_as_of(NetId(id as u16), t);
                        prop_assert!(
                            got.is_none() || got == model_as_of(&model, id, t),
                            "entity {} as of {}: {:?}", id, t, got
                        );
                    }
                }
            }
            prop_assert!(replica.stats().snapshots > 30, "{:?}", replica.stats());
        }
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic_and_a_refused_body_changes_nothing(
            noise in prop::collection::vec(any::<u8>(), 0..200), cut in any::<prop::sample::Index>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..4),
        ) {
            let b = bodies(3, &[(1, 0), (2, 1)]);
            let mut replica = new_replica();
            replica.read(&b[0]).unwrap();
            let view: Vec<_> = replica.entities().collect();
            if replica.read(&noise).is_err() {
                prop_assert_eq!(replica.entities().collect::<Vec<_>>(), view.clone());
            }
            // A real snapshot, cut short or with bytes flipped.
            let mut bad = b[1].clone();
            bad.truncate(cut.index(bad.len() + 1));
            for (at, x) in &flips {
                if !bad.is_empty() {
                    let i = at.index(bad.len());
                    bad[i] ^= x;
                }
            }
            let mut fresh = new_replica();
            fresh.read(&b[0]).unwrap();
            if fresh.read(&bad).is_err() {
                prop_assert_eq!(fresh.entities().collect::<Vec<_>>(), view);
                prop_assert_eq!(fresh.newest_tick(), Some(0));
            }
        }
    }
}
