//! The map file's parser: text in, boxes, barriers and spawn points out, or a [`MapError`]
//! naming the line. The format is documented on [`crate::map`].

use super::{Aabb, MapError, SpawnPoint, MAX_BARRIERS, MAX_BOXES, MAX_COORD_M, MAX_SPAWNS};
use crate::math::Vec3;
use crate::rules::Team;

/// Longest field quoted back in an error, characters.
const MAX_QUOTED_CHARS: usize = 32;

/// What a map file lists, checked but not yet indexed.
pub(super) struct Parsed {
    pub(super) boxes: Vec<Aabb>,
    pub(super) barriers: Vec<Aabb>,
    pub(super) spawns: Vec<SpawnPoint>,
}

/// Parses the text of a map file.
pub(super) fn parse(text: &str) -> Result<Parsed, MapError> {
    let mut boxes = Vec::new();
    let mut barriers = Vec::new();
    let mut spawns = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or_default();
        let mut words = content.split_whitespace();
        let Some(word) = words.next() else {
            continue;
        };
        match word {
            "box" => boxes.push(solid(line, &BOX, words, boxes.len(), MAX_BOXES, "boxes")?),
            "barrier" => barriers.push(solid(
                line,
                &BARRIER,
                words,
                barriers.len(),
                MAX_BARRIERS,
                "barriers",
            )?),
            "spawn" => {
                let f = fields::<5>(line, &SPAWN, words)?;
                let team = match f[0] {
                    "attackers" => Team::Attackers,
                    "defenders" => Team::Defenders,
                    other => {
                        return Err(bad_value(
                            line,
                            &SPAWN,
                            0,
                            other,
                            "`attackers` or `defenders`",
                        ))
                    }
                };
                let x = coord(line, &SPAWN, 1, f[1])?;
                let y = coord(line, &SPAWN, 2, f[2])?;
                let z = coord(line, &SPAWN, 3, f[3])?;
                let yaw_deg = number(line, &SPAWN, 4, f[4], "a number within ±360", |v| {
                    v.abs() <= 360.0
                })?;
                if spawns.len() == MAX_SPAWNS {
                    return Err(too_many_spawns(line));
                }
                spawns.push(SpawnPoint {
                    origin: Vec3::new(x, y, z),
                    yaw: crate::rad_to_angle16(yaw_deg.to_radians()),
                    team,
                });
            }
            "spawn_ring" => {
                let f = fields::<5>(line, &SPAWN_RING, words)?;
                let cx = coord(line, &SPAWN_RING, 0, f[0])?;
                let cy = coord(line, &SPAWN_RING, 1, f[1])?;
                let z = coord(line, &SPAWN_RING, 2, f[2])?;
                let radius = number(
                    line,
                    &SPAWN_RING,
                    3,
                    f[3],
                    "a number above 0 and within 10000",
                    |v| v > 0.0 && v <= MAX_COORD_M,
                )?;
                let count = match f[4].parse::<usize>() {
                    Ok(n) if (1..=MAX_SPAWNS).contains(&n) => n,
                    _ => {
                        return Err(bad_value(
                            line,
                            &SPAWN_RING,
                            4,
                            f[4],
                            "a whole number from 1 to 1024",
                        ))
                    }
                };
                if spawns.len() + count > MAX_SPAWNS {
                    return Err(too_many_spawns(line));
                }
                for i in 0..count {
                    let angle = std::f32::consts::TAU * i as f32 / count as f32;
                    let (sin, cos) = angle.sin_cos();
                    spawns.push(SpawnPoint {
                        origin: Vec3::new(cx + cos * radius, cy + sin * radius, z),
                        yaw: crate::rad_to_angle16(angle + std::f32::consts::PI),
                        team: [Team::Attackers, Team::Defenders][i % 2],
                    });
                }
            }
            other => {
                return Err(MapError::UnknownDirective {
                    line,
                    word: quote(other),
                })
            }
        }
    }
    if boxes.is_empty() {
        return Err(MapError::NoBoxes);
    }
    if spawns.is_empty() {
        return Err(MapError::NoSpawns);
    }
    Ok(Parsed {
        boxes,
        barriers,
        spawns,
    })
}

/// The box of a `box` or `barrier` line, given `count` of its kind so far and `limit`.
fn solid<'a>(
    line: usize,
    form: &Form,
    words: impl Iterator<Item = &'a str> + Clone,
    count: usize,
    limit: usize,
    what: &'static str,
) -> Result<Aabb, MapError> {
    let f = fields::<6>(line, form, words)?;
    let mut c = [0.0; 6];
    for (i, text) in f.iter().enumerate() {
        c[i] = coord(line, form, i, text)?;
    }
    for (axis, name) in ['x', 'y', 'z'].into_iter().enumerate() {
        if c[axis] >= c[axis + 3] {
            return Err(MapError::EmptyBox {
                line,
                axis: name,
                min: c[axis],
                max: c[axis + 3],
                usage: form.usage,
            });
        }
    }
    if count == limit {
        return Err(MapError::TooMany { line, what, limit });
    }
    Ok(Aabb {
        min: Vec3::new(c[0], c[1], c[2]),
        max: Vec3::new(c[3], c[4], c[5]),
    })
}

struct Form {
    directive: &'static str,
    usage: &'static str,
    fields: &'static [&'static str],
}

const BOX: Form = Form {
    directive: "box",
    usage: "box MIN_X MIN_Y MIN_Z MAX_X MAX_Y MAX_Z",
    fields: &["MIN_X", "MIN_Y", "MIN_Z", "MAX_X", "MAX_Y", "MAX_Z"],
};
const BARRIER: Form = Form {
    directive: "barrier",
    usage: "barrier MIN_X MIN_Y MIN_Z MAX_X MAX_Y MAX_Z",
    fields: &["MIN_X", "MIN_Y", "MIN_Z", "MAX_X", "MAX_Y", "MAX_Z"],
};
const SPAWN: Form = Form {
    directive: "spawn",
    usage: "spawn TEAM X Y Z YAW_DEG",
    fields: &["TEAM", "X", "Y", "Z", "YAW_DEG"],
};
const SPAWN_RING: Form = Form {
    directive: "spawn_ring",
    usage: "spawn_ring CENTRE_X CENTRE_Y Z RADIUS COUNT",
    fields: &["CENTRE_X", "CENTRE_Y", "Z", "RADIUS", "COUNT"],
};

const COORD_RANGE: &str = "a number within ±10000";

fn fields<'a, const N: usize>(
    line: usize,
    form: &Form,
    words: impl Iterator<Item = &'a str> + Clone,
) -> Result<[&'a str; N], MapError> {
    let found = words.clone().count();
    if found != N {
        return Err(MapError::FieldCount {
            line,
            directive: form.directive,
            found,
            usage: form.usage,
        });
    }
    let mut out = [""; N];
    for (slot, word) in out.iter_mut().zip(words) {
        *slot = word;
    }
    Ok(out)
}

fn number(
    line: usize,
    form: &Form,
    field: usize,
    text: &str,
    range: &'static str,
    ok: impl Fn(f32) -> bool,
) -> Result<f32, MapError> {
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() && ok(v) => Ok(v),
        _ => Err(bad_value(line, form, field, text, range)),
    }
}

fn coord(line: usize, form: &Form, field: usize, text: &str) -> Result<f32, MapError> {
    number(line, form, field, text, COORD_RANGE, |v| {
        v.abs() <= MAX_COORD_M
    })
}

fn bad_value(line: usize, form: &Form, field: usize, text: &str, range: &'static str) -> MapError {
    MapError::BadValue {
        line,
        field: form.fields[field],
        text: quote(text),
        range,
        usage: form.usage,
    }
}

fn too_many_spawns(line: usize) -> MapError {
    MapError::TooMany {
        line,
        what: "spawn points",
        limit: MAX_SPAWNS,
    }
}

pub(super) fn quote(text: &str) -> String {
    text.chars().take(MAX_QUOTED_CHARS).collect()
}
