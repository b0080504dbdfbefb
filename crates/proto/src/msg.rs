//! Messages a match exchanges inside a connection's reliability packets.
//!
//! ```text
//! unreliable, one per packet (the reliable layer's tag in brackets):
//!   client → server   1 Input     seq u32 | view_tick u32 | view_frac u8 | input bytes [tag = seq]
//!   server → client   1 Snapshot  tick u32 | input_ack u32 | body        [tag = tick]
//! reliable, ordered, server → client:
//!   1 Welcome     match_id u32 | seat u16 | tick_hz u16 | seats u16 | entities u16
//!                 | schema u32 | epoch u32
//!   6 Epoch       epoch u32
//!   7 Game        the game's own event bytes, to the end
//!   8 Games       two or more of the game's events: (len varint | bytes[len]) each, to the end
//! reliable, ordered, client → server:
//!   the game's own message bytes, as they are (the runtime hands them to the game)
//! ```
//!
//! Kinds 2 to 5 were the reference shooter's events before the game boundary; they now
//! travel inside `Game` in the shooter's own format (`tickforge_shooter::event`), and the
//! kinds stay unused here so an old client fails loudly rather than misreading.
//!
//! A tick's game events for one client travel as one reliable message: `Game` when there is
//! one, `Games` when there are more ([`push_game_event`] builds it). A link's send queue
//! bounds its messages, so a game that broadcasts a burst (a round's revivals, a wave of
//! kills among a thousand players) fills it by ticks, not by events. `len` is LEB128: 7 bits
//! a byte, low first, the high bit set on every byte but the last, in as few bytes as the
//! value needs (1 to 3 under [`MAX_EVENT_BYTES`]).
//!
//! `schema` in the welcome is the fingerprint of the game's replicated-field table
//! (`Schema::fingerprint`): a client built with another table refuses the match rather than
//! decoding its snapshots as nonsense. `entities` is how many network ids the match's
//! snapshots may carry (`0..entities`).
//!
//! A match that ends starts over (a new world, ticks from 0, replication afresh) under the
//! next `epoch`: every seated client is sent [`Event::Epoch`] first, and its snapshots of the
//! new match only once the server has the event acknowledged (with everything queued
//! before it), so a client that resets its snapshot decoder on the event never applies a
//! new match's snapshot to the old match's baselines, whatever its tick.
//!
//! `seq` numbers a client's inputs from 1; `input_ack` is the newest input sequence the
//! server had applied for that client when it built the snapshot, so the client can time
//! each input from sending to the first snapshot that reflects it (the Quake paper's
//! response time). Bodies (the input and the snapshot) are opaque here: the game decodes
//! its input, and the `replication` crate encodes snapshots. [`link_config`] is the reliability setting both ends
//! of a tickforge connection use.

use std::time::Duration;

use crate::reliable::ReliableConfig;
use crate::wire::{Reader, Truncated, Writer};

/// A payload that is not a message this side accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    /// Shorter than its kind needs.
    #[error("message truncated")]
    Truncated,
    /// First byte names no message of this direction.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// Bytes after the end of a fixed-size message.
    #[error("message has trailing bytes")]
    TrailingBytes,
    /// A field holds a value its type does not take (a flag byte other than 0 or 1), so
    /// every message has exactly one encoding.
    #[error("message field out of range")]
    BadValue,
}

impl From<Truncated> for MsgError {
    fn from(_: Truncated) -> Self {
        MsgError::Truncated
    }
}

/// A message from a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientMsg<'a> {
    /// The player's command for its next tick.
    Input {
        /// Numbers inputs from 1, one per client tick.
        seq: u32,
        /// The server tick of the world the player was looking at when it made this
        /// command: where a shot in it is tested (lag compensation).
        view_tick: u32,
        /// How far past `view_tick` toward the next tick the player's view was, in 1/256
        /// of a tick (clients interpolate between snapshots).
        view_frac: u8,
        /// The game's encoded input.
        cmd: &'a [u8],
    },
}

const INPUT: u8 = 1;
const SNAPSHOT: u8 = 1;
const WELCOME: u8 = 1;
const EPOCH: u8 = 6;
const GAME: u8 = 7;
const GAMES: u8 = 8;

/// The largest reliable message of a tickforge link ([`link_config`]'s `max_message_bytes`):
/// a game event longer than this cannot be sent.
pub const MAX_EVENT_BYTES: usize = 16 << 10;

impl<'a> ClientMsg<'a> {
    /// Decodes a client payload.
    pub fn decode(payload: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(payload);
        match r.u8()? {
            INPUT => Ok(ClientMsg::Input {
                seq: r.u32()?,
                view_tick: r.u32()?,
                view_frac: r.u8()?,
                cmd: r.rest(),
            }),
            k => Err(MsgError::UnknownKind(k)),
        }
    }

    /// Appends the encoded message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            ClientMsg::Input {
                seq,
                view_tick,
                view_frac,
                cmd,
            } => {
                w.u8(INPUT);
                w.u32(seq);
                w.u32(view_tick);
                w.u8(view_frac);
                w.bytes(cmd);
            }
        }
    }
}

/// A message from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerMsg<'a> {
    /// The state of the match after `tick`.
    Snapshot {
        /// The server tick this snapshot follows.
        tick: u32,
        /// Newest input sequence of this client applied by then (0: none yet).
        input_ack: u32,
        /// The encoded state.
        body: &'a [u8],
    },
}

/// Bytes of a snapshot message before its body.
pub const SNAPSHOT_HEADER_BYTES: usize = 1 + 4 + 4;

impl<'a> ServerMsg<'a> {
    /// Decodes a server payload.
    pub fn decode(payload: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(payload);
        match r.u8()? {
            SNAPSHOT => Ok(ServerMsg::Snapshot {
                tick: r.u32()?,
                input_ack: r.u32()?,
                body: r.rest(),
            }),
            k => Err(MsgError::UnknownKind(k)),
        }
    }

    /// Appends the encoded message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            ServerMsg::Snapshot {
                tick,
                input_ack,
                body,
            } => {
                w.u8(SNAPSHOT);
                w.u32(tick);
                w.u32(input_ack);
                w.bytes(body);
            }
        }
    }
}

/// A reliable, ordered message from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Sent once when a client is seated: where it is, how fast the match ticks, and what
    /// its snapshots carry.
    Welcome {
        /// The match.
        match_id: u32,
        /// The client's seat.
        seat: u16,
        /// The match's tick rate.
        tick_hz: u16,
        /// The match's seats.
        seats: u16,
        /// Network ids the match's snapshots may carry: every id is below this.
        entities: u16,
        /// Fingerprint of the game's replicated-field table (`Schema::fingerprint`).
        schema: u32,
        /// How many times the match has started over since it was made (0: its first run).
        epoch: u32,
    },
    /// The match ended and started over: a new game whose ticks count from 0 again, with
    /// replication afresh. Sent to every seated client, before any snapshot of the new
    /// match; the client drops its snapshot baselines and its view of the old match.
    Epoch {
        /// The new run's epoch, one more than the last (see [`Event::Welcome`]).
        epoch: u32,
    },
    /// An event of the game, in the game's own format.
    Game(&'a [u8]),
    /// Two or more events of the game, in order: one tick's for this client.
    Games(GameEvents<'a>),
}

/// The game events of a [`Event::Games`] message, checked when it was decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GameEvents<'a> {
    /// `(len varint | bytes[len])` each, to the end.
    items: &'a [u8],
}

impl<'a> GameEvents<'a> {
    /// Checks `items`: whole events, at least two, canonical lengths.
    fn parse(items: &'a [u8]) -> Result<Self, MsgError> {
        let mut rest = items;
        let mut count = 0;
        while !rest.is_empty() {
            rest = split_event(rest)?.1;
            count += 1;
        }
        if count < 2 {
            // One event travels as `Game`: each message has one encoding.
            return Err(MsgError::BadValue);
        }
        Ok(GameEvents { items })
    }

    /// The events, in order.
    pub fn iter(&self) -> GameEventsIter<'a> {
        GameEventsIter {
            one: None,
            rest: self.items,
        }
    }
}

impl<'a> IntoIterator for GameEvents<'a> {
    type Item = &'a [u8];
    type IntoIter = GameEventsIter<'a>;
    fn into_iter(self) -> GameEventsIter<'a> {
        self.iter()
    }
}

/// The events of a [`GameEvents`], in order.
#[derive(Clone, Debug)]
pub struct GameEventsIter<'a> {
    /// A lone event (of a `Game` message), before `rest`.
    one: Option<&'a [u8]>,
    rest: &'a [u8],
}

impl<'a> Iterator for GameEventsIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if let Some(one) = self.one.take() {
            return Some(one);
        }
        // Checked by `GameEvents::parse`: never an error here.
        let (event, rest) = split_event(self.rest).ok()?;
        self.rest = rest;
        Some(event)
    }
}

/// The first `len | bytes` of `items` and what follows it.
fn split_event(items: &[u8]) -> Result<(&[u8], &[u8]), MsgError> {
    let (len, at) = read_len(items)?;
    let end = at.checked_add(len).ok_or(MsgError::Truncated)?;
    let event = items.get(at..end).ok_or(MsgError::Truncated)?;
    Ok((event, &items[end..]))
}

/// A LEB128 length of at most 3 bytes at the start of `b`, and the bytes it took; one
/// written longer than it needs, or above [`MAX_EVENT_BYTES`], is refused.
fn read_len(b: &[u8]) -> Result<(usize, usize), MsgError> {
    let mut value = 0usize;
    for i in 0..3 {
        let byte = *b.get(i).ok_or(MsgError::Truncated)?;
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return Err(MsgError::BadValue);
            }
            if value > MAX_EVENT_BYTES {
                return Err(MsgError::BadValue);
            }
            return Ok((value, i + 1));
        }
    }
    Err(MsgError::BadValue)
}

/// Where the game event at byte `at` of a decoded [`Event::Games`] message lies (`at` is 1
/// for its first; each next one starts at the end of the last): for a reader that keeps
/// the message and hands its events out one at a time. `None` past the last, or where
/// `message` holds no event at `at`.
pub fn game_event_range(message: &[u8], at: usize) -> Option<std::ops::Range<usize>> {
    let rest = message.get(at..).filter(|r| !r.is_empty())?;
    let (len, took) = read_len(rest).ok()?;
    let start = at + took;
    let end = start.checked_add(len).filter(|&e| e <= message.len())?;
    Some(start..end)
}

/// `len` as LEB128 (below 2^21: at most 3 bytes), and the bytes it takes.
fn leb128(len: usize) -> ([u8; 3], usize) {
    debug_assert!(len < 1 << 21);
    let mut out = [0; 3];
    let mut v = len;
    let mut n = 0;
    loop {
        out[n] = (v & 0x7f) as u8;
        v >>= 7;
        n += 1;
        if v == 0 || n == 3 {
            return (out, n);
        }
        out[n - 1] |= 0x80;
    }
}

/// Appends `len` as LEB128.
fn write_len(out: &mut Vec<u8>, len: usize) {
    let (b, n) = leb128(len);
    out.extend_from_slice(&b[..n]);
}

/// Bytes `len` takes as LEB128.
fn len_bytes(len: usize) -> usize {
    leb128(len.min((1 << 21) - 1)).1
}

/// The length of `message` (empty, or built by [`push_game_event`]) once `event` is added.
pub fn with_game_event(message: &[u8], event: usize) -> usize {
    match message.first() {
        None => 1 + event,
        Some(&GAME) => message.len() + len_bytes(message.len() - 1) + len_bytes(event) + event,
        Some(_) => message.len() + len_bytes(event) + event,
    }
}

/// Adds the game event `event` to `message`: an empty `message` becomes a `Game` event, a
/// `Game` event becomes `Games` with both, a `Games` event takes one more. `message` must
/// be empty or built by this function; it allocates only when `message` must grow.
pub fn push_game_event(message: &mut Vec<u8>, event: &[u8]) {
    match message.first() {
        None => {
            message.push(GAME);
            message.extend_from_slice(event);
        }
        Some(&GAME) => {
            // `GAME | first` becomes `GAMES | len(first) | first`.
            let first = message.len() - 1;
            let (len, shift) = leb128(first);
            message.resize(message.len() + shift, 0);
            message.copy_within(1..1 + first, 1 + shift);
            message[0] = GAMES;
            message[1..1 + shift].copy_from_slice(&len[..shift]);
            write_len(message, event.len());
            message.extend_from_slice(event);
        }
        Some(_) => {
            debug_assert_eq!(message[0], GAMES, "a message built by push_game_event");
            write_len(message, event.len());
            message.extend_from_slice(event);
        }
    }
}

impl<'a> Event<'a> {
    /// Decodes an event; trailing bytes after a fixed-size event are an error.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(bytes);
        let e = match r.u8()? {
            WELCOME => Event::Welcome {
                match_id: r.u32()?,
                seat: r.u16()?,
                tick_hz: r.u16()?,
                seats: r.u16()?,
                entities: r.u16()?,
                schema: r.u32()?,
                epoch: r.u32()?,
            },
            EPOCH => Event::Epoch { epoch: r.u32()? },
            GAME => Event::Game(r.rest()),
            GAMES => Event::Games(GameEvents::parse(r.rest())?),
            k => return Err(MsgError::UnknownKind(k)),
        };
        if r.remaining() != 0 {
            return Err(MsgError::TrailingBytes);
        }
        Ok(e)
    }

    /// Appends the encoded event to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            Event::Welcome {
                match_id,
                seat,
                tick_hz,
                seats,
                entities,
                schema,
                epoch,
            } => {
                w.u8(WELCOME);
                w.u32(match_id);
                w.u16(seat);
                w.u16(tick_hz);
                w.u16(seats);
                w.u16(entities);
                w.u32(schema);
                w.u32(epoch);
            }
            Event::Epoch { epoch } => {
                w.u8(EPOCH);
                w.u32(epoch);
            }
            Event::Game(bytes) => {
                w.u8(GAME);
                w.bytes(bytes);
            }
            Event::Games(events) => {
                w.u8(GAMES);
                w.bytes(events.items);
            }
        }
    }

    /// The game events this event carries, in order: its one for `Game`, each of `Games`'s,
    /// none for the runtime's own events.
    pub fn game_events(&self) -> GameEventsIter<'a> {
        match *self {
            Event::Game(bytes) => GameEventsIter {
                one: Some(bytes),
                rest: &[],
            },
            Event::Games(events) => events.iter(),
            Event::Welcome { .. } | Event::Epoch { .. } => GameEventsIter {
                one: None,
                rest: &[],
            },
        }
    }
}

/// The reliability settings both ends of a tickforge connection use (they must agree).
///
/// Sized for a game connection rather than a file transfer: events of up to 16 KiB, 64
/// of them in flight, about 70 KiB reserved per connection (the defaults reserve 440 KiB,
/// too much for a worker holding hundreds of clients).
pub fn link_config() -> ReliableConfig {
    ReliableConfig {
        max_packet_bytes: crate::MAX_PACKET_BYTES,
        reliable_reserved_bytes: 256,
        fragment_bytes: 240,
        max_message_bytes: MAX_EVENT_BYTES,
        reassembly_bytes: 32 << 10,
        send_queue_messages: 256,
        send_queue_bytes: 32 << 10,
        receive_window_messages: 64,
        packet_history: 256,
        initial_rtt: Duration::from_millis(100),
        resend_margin: Duration::from_micros(15_625), // two ticks at 128 Hz
        min_resend_after: Duration::from_millis(30),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_message_round_trips() {
        let client = [ClientMsg::Input {
            seq: 77,
            view_tick: 5,
            view_frac: 200,
            cmd: &[1, 2, 3],
        }];
        for m in client {
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert_eq!(ClientMsg::decode(&buf), Ok(m));
        }
        let server = [ServerMsg::Snapshot {
            tick: 9,
            input_ack: 8,
            body: &[4; 10],
        }];
        for m in server {
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert_eq!(ServerMsg::decode(&buf), Ok(m));
        }
        let mut buf = Vec::new();
        ServerMsg::Snapshot {
            tick: 0,
            input_ack: 0,
            body: &[],
        }
        .encode(&mut buf);
        assert_eq!(buf.len(), SNAPSHOT_HEADER_BYTES);
    }

    #[test]
    fn every_event_round_trips_and_refuses_trailing_bytes() {
        let fixed = [
            Event::Welcome {
                match_id: 3,
                seat: 4,
                tick_hz: 128,
                seats: 10,
                entities: 12,
                schema: 0xdead_beef,
                epoch: 0,
            },
            Event::Welcome {
                match_id: 3,
                seat: 999,
                tick_hz: 30,
                seats: 1000,
                entities: 1024,
                schema: 1,
                epoch: 0x0102_0304,
            },
            Event::Epoch { epoch: 1 },
            Event::Epoch { epoch: u32::MAX },
        ];
        for e in fixed {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(Event::decode(&buf), Ok(e));
            buf.push(0);
            assert_eq!(Event::decode(&buf), Err(MsgError::TrailingBytes));
            buf.truncate(buf.len() - 2);
            assert_eq!(Event::decode(&buf), Err(MsgError::Truncated));
        }
        for bytes in [&[][..], &[2, 0, 0, 0][..]] {
            let mut buf = Vec::new();
            Event::Game(bytes).encode(&mut buf);
            assert_eq!(buf.len(), 1 + bytes.len());
            assert_eq!(Event::decode(&buf), Ok(Event::Game(bytes)));
        }
        for old_kind in 2..=5 {
            assert_eq!(
                Event::decode(&[old_kind, 0, 0, 0]),
                Err(MsgError::UnknownKind(old_kind))
            );
        }
    }

    /// Builds one message of `events` with `push_game_event`, checking `with_game_event`'s
    /// forecast at each step.
    fn built(events: &[Vec<u8>]) -> Vec<u8> {
        let mut m = Vec::new();
        for e in events {
            let want = with_game_event(&m, e.len());
            push_game_event(&mut m, e);
            assert_eq!(m.len(), want, "forecast of the length");
        }
        m
    }

    #[test]
    fn a_tick_of_game_events_is_one_message_read_back_in_order() {
        // Lengths around each LEB128 width.
        let sizes = [0, 1, 127, 128, 300, 16_383, 5];
        let events: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        for n in 1..=events.len() {
            let m = built(&events[..n]);
            let e = Event::decode(&m).expect("a valid message");
            let got: Vec<&[u8]> = e.game_events().collect();
            let want: Vec<&[u8]> = events[..n].iter().map(Vec::as_slice).collect();
            assert_eq!(got, want);
            match e {
                Event::Game(bytes) => assert_eq!((n, bytes), (1, &events[0][..])),
                Event::Games(_) => assert!(n >= 2),
                other => panic!("{other:?}"),
            }
            // Encoding the decoded event gives the same bytes.
            let mut again = Vec::new();
            e.encode(&mut again);
            assert_eq!(again, m);
        }
        assert_eq!(built(&[vec![9]]), [GAME, 9], "one event is a plain Game");
        assert_eq!(built(&[vec![9], vec![]]), [GAMES, 1, 9, 0]);
        assert_eq!(built(&[vec![7; 128], vec![]])[..3], [GAMES, 0x80, 0x01]);
        let welcome = Event::Epoch { epoch: 1 };
        assert_eq!(welcome.game_events().count(), 0);
        // One at a time from the message's bytes, as a client that keeps them reads them.
        let m = built(&events);
        let mut at = 1;
        let mut got = Vec::new();
        while let Some(r) = game_event_range(&m, at) {
            at = r.end;
            got.push(m[r].to_vec());
        }
        assert_eq!(got, events);
    }

    #[test]
    fn a_games_message_has_one_encoding() {
        let bad: [(&[u8], MsgError); 7] = [
            (&[GAMES], MsgError::BadValue),                         // no event
            (&[GAMES, 1, 9], MsgError::BadValue),                   // one: that is a Game
            (&[GAMES, 1, 9, 2, 1], MsgError::Truncated),            // a short second
            (&[GAMES, 1, 9, 0x80], MsgError::Truncated),            // a length cut off
            (&[GAMES, 1, 9, 0x80, 0x00], MsgError::BadValue),       // 0 in two bytes
            (&[GAMES, 1, 9, 0x81, 0x80, 0x01], MsgError::BadValue), // 16385 > the largest
            (&[GAMES, 1, 9, 0x80, 0x80, 0x80, 0x01], MsgError::BadValue), // four bytes
        ];
        for (bytes, err) in bad {
            assert_eq!(Event::decode(bytes), Err(err), "{bytes:?}");
        }
        assert!(Event::decode(&[GAMES, 1, 9, 0]).is_ok());
    }

    #[test]
    fn the_link_config_is_valid_and_small() {
        let c = link_config();
        assert_eq!(c.validate(), Ok(()));
        assert!(
            c.send_queue_bytes + c.reassembly_bytes + c.receive_window_messages * c.fragment_bytes
                < 96 << 10
        );
    }

    #[test]
    fn bad_kinds_and_short_bodies_are_errors() {
        assert_eq!(ClientMsg::decode(&[]), Err(MsgError::Truncated));
        assert_eq!(ClientMsg::decode(&[9]), Err(MsgError::UnknownKind(9)));
        assert_eq!(ClientMsg::decode(&[INPUT, 1, 2]), Err(MsgError::Truncated));
        assert_eq!(
            ServerMsg::decode(&[SNAPSHOT, 0, 0, 0, 0, 0]),
            Err(MsgError::Truncated)
        );
    }

    proptest! {
        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ClientMsg::decode(&data);
            let _ = ServerMsg::decode(&data);
            let _ = Event::decode(&data);
        }

        #[test]
        fn game_events_round_trip(
            events in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..24)
        ) {
            let m = built(&events);
            let e = Event::decode(&m).expect("a valid message");
            let got: Vec<Vec<u8>> = e.game_events().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, events);
        }

        #[test]
        fn a_games_message_that_decodes_is_the_one_its_events_build(
            tail in proptest::collection::vec(any::<u8>(), 0..48)
        ) {
            let mut data = vec![GAMES];
            data.extend_from_slice(&tail);
            if let Ok(e) = Event::decode(&data) {
                let events: Vec<Vec<u8>> = e.game_events().map(<[u8]>::to_vec).collect();
                prop_assert_eq!(built(&events), data);
            }
        }
    }
}
