//! The map format, the built-in maps and ray queries, through the public API.

use std::path::Path;

use proptest::prelude::*;
use tickforge_game::map::{Hull, MapError, MAX_BOXES, SKIN_M};
use tickforge_game::rules::Team;
use tickforge_game::{BuiltinMap, Map, Vec3};

const HULL: Hull = Hull {
    half_width: 0.4,
    height: 1.8,
};

fn parse_err(text: &str) -> MapError {
    Map::parse(text).expect_err("should not parse")
}

/// One floor box and one spawn, plus `extra`.
fn minimal(extra: &str) -> String {
    format!("box -10 -10 -1 10 10 0\nspawn attackers 0 0 0 0\n{extra}")
}

#[test]
fn every_builtin_map_loads() {
    for builtin in BuiltinMap::ALL {
        let map = builtin.load();
        assert!(map.boxes().len() >= 6, "{}", builtin.name());
        assert_eq!(
            Map::builtin(builtin.name()).unwrap().boxes(),
            map.boxes(),
            "{}",
            builtin.name()
        );
    }
    assert_eq!(BuiltinMap::default(), BuiltinMap::Arena);
}

#[test]
fn the_files_under_maps_are_the_builtin_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../maps");
    for builtin in BuiltinMap::ALL {
        let path = dir.join(format!("{}.map", builtin.name()));
        let loaded = Map::load(&path).unwrap();
        assert_eq!(loaded.boxes(), builtin.load().boxes());
        assert_eq!(loaded.barriers(), builtin.load().barriers());
        assert_eq!(loaded.spawns(), builtin.load().spawns());
    }
}

/// Every spawn point has room for a player, standing on something, inside the walls, and
/// clear of the barriers raised over it in the buy phase.
fn assert_spawns_are_clear(map: &Map) {
    let raised = map.with_barriers(true);
    for (i, s) in map.spawns().iter().enumerate() {
        let feet = s.origin + Vec3::new(0.0, 0.0, SKIN_M);
        assert!(!raised.hull_overlaps(HULL, feet), "spawn {i} is in a box");
        let down = map.trace_hull(feet, feet - Vec3::new(0.0, 0.0, 0.1), HULL);
        assert!(down.fraction < 0.1, "spawn {i} has no floor");
        assert_eq!(down.normal, Vec3::new(0.0, 0.0, 1.0));
        // Sealed: a ray from head height in each direction along the floor meets a box.
        for yaw in 0..16 {
            let a = yaw as f32 * std::f32::consts::TAU / 16.0;
            let dir = Vec3::new(a.cos(), a.sin(), 0.0);
            assert!(map
                .trace_ray(feet + Vec3::new(0.0, 0.0, 1.6), dir, f32::INFINITY)
                .is_some());
        }
        assert!(map
            .trace_ray(feet, Vec3::new(0.0, 0.0, 1.0), f32::INFINITY)
            .is_some());
    }
}

#[test]
fn the_arena_has_five_clear_spawns_a_team() {
    let map = BuiltinMap::Arena.load();
    assert_eq!(map.spawns().len(), 10);
    for team in [Team::Attackers, Team::Defenders] {
        assert_eq!(map.spawns().iter().filter(|s| s.team == team).count(), 5);
    }
    assert_spawns_are_clear(&map);
    // About 60 × 40 m inside its walls.
    let b = map.bounds();
    assert_eq!((b.max.x - b.min.x, b.max.y - b.min.y), (62.0, 42.0));
    // Team A faces east, team B west.
    assert_eq!(map.spawn_point(Team::Attackers, 0).yaw, 0);
    assert_eq!(map.spawn_point(Team::Defenders, 0).yaw, 32768);
}

#[test]
fn the_2km_map_has_100_clear_spawns_on_the_800_m_circle() {
    let map = BuiltinMap::Flat2km.load();
    assert_eq!(map.spawns().len(), 100);
    assert_spawns_are_clear(&map);
    for (i, s) in map.spawns().iter().enumerate() {
        assert!((s.origin.horizontal_length() - 800.0).abs() < 0.01);
        assert_eq!(s.team, [Team::Attackers, Team::Defenders][i % 2]);
        // Facing the centre.
        let yaw = tickforge_game::angle16_to_rad(s.yaw);
        let facing = Vec3::new(yaw.cos(), yaw.sin(), 0.0);
        assert!(facing.dot(s.origin * (-1.0 / 800.0)) > 0.999);
    }
    let b = map.bounds();
    assert_eq!((b.max.x - b.min.x, b.max.y - b.min.y), (2002.0, 2002.0));
}

#[test]
fn spawn_points_count_round_within_a_team() {
    let map = BuiltinMap::Arena.load();
    assert_eq!(
        map.spawn_point(Team::Defenders, 5),
        map.spawn_point(Team::Defenders, 0)
    );
    assert_ne!(
        map.spawn_point(Team::Defenders, 1),
        map.spawn_point(Team::Defenders, 0)
    );
    // A team without points takes anyone's.
    let solo = Map::parse(&minimal("")).unwrap();
    assert_eq!(solo.spawn_point(Team::Defenders, 3).team, Team::Attackers);
}

#[test]
fn an_unknown_builtin_is_an_error() {
    let e = Map::builtin("de_dust2").unwrap_err();
    assert!(matches!(e, MapError::UnknownBuiltin { ref name } if name == "de_dust2"));
    assert!(e.to_string().contains("`arena` or `flat2km`"));
    assert!(matches!(
        Map::load("/nonexistent/x.map"),
        Err(MapError::Io { .. })
    ));
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let map = Map::parse(
        "# a map\n\n   \t\nbox -1 -1 -1 1 1 0 # the floor\nspawn defenders 0 0 0 90\n# end",
    )
    .unwrap();
    assert_eq!(map.boxes().len(), 1);
    assert_eq!(map.spawns()[0].yaw, 16384);
    assert_eq!(map.spawns()[0].team, Team::Defenders);
}

#[test]
fn errors_name_the_line_and_the_expected_form() {
    let e = parse_err("box 0 0 0 1 1 1\nspawn attackers 0 0 0 0\nbx 0 0 0 1 1 1\n");
    assert!(matches!(e, MapError::UnknownDirective { line: 3, ref word } if word == "bx"));
    assert_eq!(
        e.to_string(),
        "line 3: unknown directive `bx`; expected `box`, `barrier`, `spawn` or `spawn_ring`"
    );

    let e = parse_err(&minimal("box 0 0 0 1 1"));
    assert!(matches!(
        e,
        MapError::FieldCount {
            line: 3,
            directive: "box",
            found: 5,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "line 3: `box` has 5 fields; expected `box MIN_X MIN_Y MIN_Z MAX_X MAX_Y MAX_Z`"
    );

    let e = parse_err(&minimal("\nspawn attackers 0 0 zero 0"));
    assert!(matches!(
        e,
        MapError::BadValue {
            line: 4,
            field: "Z",
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "line 4: Z is `zero`, expected a number within ±10000, in `spawn TEAM X Y Z YAW_DEG`"
    );
}

#[test]
fn bad_values_are_errors() {
    for (text, field) in [
        ("box 0 0 0 1 1 NaN", "MAX_Z"),
        ("box 0 0 0 inf 1 1", "MAX_X"),
        ("box -1e9 0 0 1 1 1", "MIN_X"),
        ("box 0 0 0 1 1 1e40", "MAX_Z"),
        ("spawn a 0 0 0 0", "TEAM"),
        ("spawn Attackers 0 0 0 0", "TEAM"),
        ("spawn attackers 0 0 0 720", "YAW_DEG"),
        ("spawn_ring 0 0 0 800 0", "COUNT"),
        ("spawn_ring 0 0 0 800 -3", "COUNT"),
        ("spawn_ring 0 0 0 800 2.5", "COUNT"),
        ("spawn_ring 0 0 0 800 99999999999999999999", "COUNT"),
        ("spawn_ring 0 0 0 -5 10", "RADIUS"),
        ("spawn_ring 0 0 0 0 10", "RADIUS"),
    ] {
        let e = parse_err(&minimal(text));
        assert!(
            matches!(e, MapError::BadValue { line: 3, field: f, .. } if f == field),
            "{text}: {e}"
        );
    }
}

#[test]
fn empty_boxes_are_errors() {
    let e = parse_err(&minimal("box 0 0 0 1 0 1"));
    assert!(
        matches!(
            e,
            MapError::EmptyBox {
                line: 3,
                axis: 'y',
                ..
            }
        ),
        "{e}"
    );
    let e = parse_err(&minimal("box 0 0 2 1 1 1"));
    assert!(matches!(e, MapError::EmptyBox { axis: 'z', .. }), "{e}");
}

#[test]
fn a_map_needs_a_box_and_a_spawn() {
    assert!(matches!(parse_err(""), MapError::NoBoxes));
    assert!(matches!(
        parse_err("spawn attackers 0 0 0 0"),
        MapError::NoBoxes
    ));
    assert!(matches!(parse_err("box 0 0 0 1 1 1"), MapError::NoSpawns));
}

#[test]
fn limits_are_errors_not_allocations() {
    let many = "box 0 0 0 1 1 1\n".repeat(MAX_BOXES + 1);
    assert!(matches!(
        parse_err(&minimal(&many)),
        MapError::TooMany {
            what: "boxes",
            limit: MAX_BOXES,
            ..
        }
    ));
    let rings = "spawn_ring 0 0 0 5 1000\n".repeat(2);
    assert!(matches!(
        parse_err(&minimal(&rings)),
        MapError::TooMany { line: 4, .. }
    ));
    // A long field is quoted short.
    let e = parse_err(&minimal(&format!("box {} 0 0 1 1 1", "9".repeat(10_000))));
    assert!(e.to_string().len() < 200, "{e}");
}

#[test]
fn a_ray_hits_the_first_box_in_front() {
    let map = Map::parse(&minimal("box 5 -1 0 6 1 2\nbox 8 -1 0 9 1 2")).unwrap();
    let hit = map
        .trace_ray(Vec3::new(0.0, 0.0, 1.0), Vec3::new(2.0, 0.0, 0.0), 100.0)
        .unwrap();
    assert_eq!(hit.box_index, 1);
    assert_eq!(hit.distance, 5.0);
    assert_eq!(hit.point, Vec3::new(5.0, 0.0, 1.0));
    assert_eq!(hit.normal, Vec3::new(-1.0, 0.0, 0.0));
    // From the other side, the other box first.
    let hit = map
        .trace_ray(Vec3::new(20.0, 0.0, 1.0), Vec3::new(-1.0, 0.0, 0.0), 100.0)
        .unwrap();
    assert_eq!((hit.box_index, hit.distance), (2, 11.0));
    assert_eq!(hit.normal, Vec3::new(1.0, 0.0, 0.0));
    // Too short to reach.
    assert!(map
        .trace_ray(Vec3::new(0.0, 0.0, 1.0), Vec3::new(1.0, 0.0, 0.0), 4.9)
        .is_none());
    // Down onto the floor's top face.
    let hit = map
        .trace_ray(Vec3::new(0.0, 0.0, 1.0), Vec3::new(0.0, 0.0, -1.0), 100.0)
        .unwrap();
    assert_eq!((hit.box_index, hit.distance), (0, 1.0));
    assert_eq!(hit.normal, Vec3::new(0.0, 0.0, 1.0));
}

#[test]
fn a_clear_ray_misses() {
    let map = Map::parse(&minimal("box 5 -1 0 6 1 2")).unwrap();
    // Over the box, pointing away, and off the map entirely.
    assert!(map
        .trace_ray(Vec3::new(0.0, 0.0, 3.0), Vec3::new(1.0, 0.0, 0.0), 100.0)
        .is_none());
    assert!(map
        .trace_ray(Vec3::new(0.0, 0.0, 1.0), Vec3::new(-1.0, 0.0, 0.1), 100.0)
        .is_none());
    assert!(map
        .trace_ray(Vec3::new(50.0, 50.0, 1.0), Vec3::new(1.0, 1.0, 0.0), 100.0)
        .is_none());
    // Degenerate input.
    let o = Vec3::new(0.0, 0.0, 1.0);
    assert!(map.trace_ray(o, Vec3::ZERO, 100.0).is_none());
    assert!(map
        .trace_ray(o, Vec3::new(f32::NAN, 0.0, 0.0), 100.0)
        .is_none());
    assert!(map
        .trace_ray(o, Vec3::new(1.0, 0.0, 0.0), f32::NAN)
        .is_none());
}

#[test]
fn rays_parallel_to_faces() {
    let map = Map::parse(&minimal("box 5 -1 0 6 1 2")).unwrap();
    let x = Vec3::new(1.0, 0.0, 0.0);
    // Within the box's y and z slabs: a hit.
    let hit = map.trace_ray(Vec3::new(0.0, 0.5, 1.5), x, 100.0).unwrap();
    assert_eq!((hit.box_index, hit.distance), (1, 5.0));
    // Along its top face and along its side face: grazes, not hits.
    assert!(map.trace_ray(Vec3::new(0.0, 0.0, 2.0), x, 100.0).is_none());
    assert!(map.trace_ray(Vec3::new(0.0, 1.0, 1.0), x, 100.0).is_none());
    // Just outside its y slab.
    assert!(map
        .trace_ray(Vec3::new(0.0, 1.001, 1.0), x, 100.0)
        .is_none());
    // Straight down through it, and straight up past it.
    let hit = map
        .trace_ray(Vec3::new(5.5, 0.0, 10.0), Vec3::new(0.0, 0.0, -1.0), 100.0)
        .unwrap();
    assert_eq!((hit.box_index, hit.distance), (1, 8.0));
    assert!(map
        .trace_ray(Vec3::new(5.5, 0.0, 10.0), Vec3::new(0.0, 0.0, 1.0), 100.0)
        .is_none());
}

#[test]
fn a_ray_starting_inside_a_box_hits_it_at_once() {
    let map = Map::parse(&minimal("box 5 -1 0 6 1 2")).unwrap();
    let hit = map
        .trace_ray(Vec3::new(5.5, 0.0, 1.0), Vec3::new(1.0, 0.0, 0.0), 100.0)
        .unwrap();
    assert_eq!(hit.box_index, 1);
    assert_eq!(hit.distance, 0.0);
    assert_eq!(hit.point, Vec3::new(5.5, 0.0, 1.0));
    assert_eq!(hit.normal, Vec3::ZERO);
    // On a face and going in: a hit at 0 with that face's normal; going out: none.
    let on_face = Vec3::new(5.0, 0.0, 1.0);
    let hit = map
        .trace_ray(on_face, Vec3::new(1.0, 0.0, 0.0), 100.0)
        .unwrap();
    assert_eq!((hit.distance, hit.normal), (0.0, Vec3::new(-1.0, 0.0, 0.0)));
    assert!(map
        .trace_ray(on_face, Vec3::new(-1.0, 0.0, 0.0), 100.0)
        .is_none());
}

#[test]
fn a_long_ray_crosses_the_2km_map_to_the_far_wall() {
    let map = BuiltinMap::Flat2km.load();
    let hit = map
        .trace_ray(
            Vec3::new(-800.0, 0.0, 1.6),
            Vec3::new(1.0, 0.0, 0.0),
            f32::INFINITY,
        )
        .unwrap();
    assert_eq!(hit.distance, 1800.0);
    assert_eq!(hit.box_index, 3);
    // Diagonally, into a corner region.
    let hit = map
        .trace_ray(
            Vec3::new(0.0, 0.0, 1.6),
            Vec3::new(1.0, 1.0, 0.0),
            f32::INFINITY,
        )
        .unwrap();
    assert!((hit.distance - 1000.0 * std::f32::consts::SQRT_2).abs() < 0.01);
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = Map::parse(&text);
    }

    #[test]
    fn mangled_maps_never_panic(
        edits in proptest::collection::vec((0usize..60, 0usize..8, "[-+0-9a-z.eE#]{0,12}"), 1..8),
    ) {
        let mut lines: Vec<Vec<String>> = BuiltinMap::Arena
            .source()
            .lines()
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect();
        for (line, field, text) in edits {
            let n = lines.len();
            let words = &mut lines[line % n];
            if field < words.len() {
                words[field] = text;
            } else {
                words.push(text);
            }
        }
        let text: Vec<String> = lines.iter().map(|w| w.join(" ")).collect();
        if let Ok(map) = Map::parse(&text.join("\n")) {
            for b in map.boxes() {
                prop_assert!(b.min.x < b.max.x && b.min.y < b.max.y && b.min.z < b.max.z);
            }
        }
    }
}
