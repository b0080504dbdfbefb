//! The boundary's failures, without a server: every bad argument is a code and a message.

use std::ptr::{null, null_mut};

use tickforge_proto::netcode::token::{ConnectToken, TokenParams};

use super::*;

/// A token made 100 s ago, good for `expire_seconds` from then.
fn token(expire_seconds: i64) -> Vec<u8> {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let params = TokenParams {
        protocol_id: 1,
        create_timestamp: unix - 100,
        expire_seconds,
        timeout_seconds: 5,
        server_addresses: vec!["127.0.0.1:9".parse().unwrap()],
    };
    ConnectToken::mint(&params, 7, &[0; 256], &[1; 32], &[2; 88]).to_bytes()
}

fn create(token: &[u8], game: &CStr, mode: u32) -> (tf_result, *mut tf_session) {
    let mut s = null_mut();
    // SAFETY: valid pointers.
    let r = unsafe {
        tf_session_create(
            token.as_ptr(),
            token.len(),
            game.as_ptr(),
            mode,
            5.0,
            &mut s,
        )
    };
    (r, s)
}

fn thread_error() -> String {
    // SAFETY: null asks for the thread's error.
    unsafe { CStr::from_ptr(tf_last_error(null())) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn bad_tokens_games_and_modes_are_codes_with_messages() {
    let good = token(160);
    let (r, s) = create(&good[..100], c"shooter", TF_MODE_SOCKET);
    assert_eq!((r, s), (tf_result::TF_ERR_BAD_TOKEN, null_mut()));
    assert!(thread_error().contains("token"), "{}", thread_error());

    let (r, _) = create(&token(10), c"shooter", TF_MODE_SOCKET);
    assert_eq!(r, tf_result::TF_ERR_TOKEN_EXPIRED, "{}", thread_error());
    assert!(thread_error().contains("expired"));

    let (r, _) = create(&good, c"chess", TF_MODE_SOCKET);
    assert_eq!(r, tf_result::TF_ERR_UNKNOWN_GAME);
    assert!(thread_error().contains("chess"));

    let (r, _) = create(&good, c"ctf", 7);
    assert_eq!(r, tf_result::TF_ERR_INVALID_ARGUMENT);

    let mut s = null_mut();
    // SAFETY: null pointers are what is tested.
    unsafe {
        assert_eq!(
            tf_session_create(null(), 2048, c"shooter".as_ptr(), 0, 0.0, &mut s),
            tf_result::TF_ERR_NULL
        );
        assert_eq!(
            tf_session_create(good.as_ptr(), good.len(), null(), 0, 0.0, &mut s),
            tf_result::TF_ERR_NULL
        );
        assert_eq!(
            tf_session_create(
                good.as_ptr(),
                good.len(),
                c"shooter".as_ptr(),
                0,
                0.0,
                null_mut()
            ),
            tf_result::TF_ERR_NULL
        );
        assert_eq!(
            tf_session_create(
                good.as_ptr(),
                good.len(),
                c"shooter".as_ptr(),
                0,
                f64::NAN,
                &mut s
            ),
            tf_result::TF_ERR_INVALID_ARGUMENT
        );
    }
}

#[test]
fn a_null_session_is_an_error_everywhere_and_free_of_null_is_nothing() {
    let mut ev = EMPTY_EVENT;
    let mut st = tf_stats::default();
    let mut n = 0usize;
    // SAFETY: null sessions are what is tested.
    unsafe {
        assert_eq!(tf_session_update(null_mut(), 1.0), tf_result::TF_ERR_NULL);
        assert_eq!(
            tf_session_poll_event(null_mut(), &mut ev),
            tf_result::TF_ERR_NULL
        );
        assert_eq!(
            tf_session_stats(null_mut(), &mut st),
            tf_result::TF_ERR_NULL
        );
        assert_eq!(
            tf_session_entity_newest(null_mut(), 0, null_mut(), 0, &mut n),
            tf_result::TF_ERR_NULL
        );
        assert_eq!(
            tf_session_disconnect(null_mut(), 1.0),
            tf_result::TF_ERR_NULL
        );
        tf_session_free(null_mut());
    }
    assert!(thread_error().contains("null"));
}

#[test]
fn engine_io_hands_out_requests_and_refuses_socket_calls_and_garbage() {
    let (r, s) = create(&token(160), c"shooter", TF_MODE_ENGINE_IO);
    assert_eq!(r, tf_result::TF_OK);
    let mut buf = [0u8; TF_MAX_DATAGRAM_BYTES];
    let mut len = 0usize;
    let mut ev = EMPTY_EVENT;
    // SAFETY: a live session and valid buffers.
    unsafe {
        assert_eq!(tf_session_update(s, 5.0), tf_result::TF_OK);
        // The connection request: exactly netcode's size.
        assert_eq!(
            tf_session_next_datagram(s, 5.0, buf.as_mut_ptr(), 10, &mut len),
            tf_result::TF_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(len, 1078);
        assert_eq!(
            tf_session_next_datagram(s, 5.0, buf.as_mut_ptr(), buf.len(), &mut len),
            tf_result::TF_OK
        );
        assert_eq!(len, 1078);
        assert_eq!(
            tf_session_next_datagram(s, 5.0, buf.as_mut_ptr(), buf.len(), &mut len),
            tf_result::TF_OK
        );
        assert_eq!(len, 0, "one request per interval");
        // Hostile bytes change nothing.
        for n in [0, 1, 50, 1078, 1500, 4000] {
            let junk = vec![0xa5u8; n];
            assert_eq!(
                tf_session_receive(s, 5.1, junk.as_ptr(), junk.len()),
                tf_result::TF_OK
            );
        }
        assert_eq!(tf_session_poll_event(s, &mut ev), tf_result::TF_OK);
        assert_eq!(ev.kind, tf_event_kind::TF_EVENT_NONE);
        // Not connected: an input is refused with its reason.
        let input = [0u8; TF_SHOOTER_INPUT_BYTES];
        assert_eq!(
            tf_session_send_input(s, 5.2, input.as_ptr(), input.len()),
            tf_result::TF_ERR_NOT_CONNECTED
        );
        assert!(CStr::from_ptr(tf_last_error(s))
            .to_bytes()
            .starts_with(b"not connected"));
        let mut lanes = [0i32; TF_MAX_LANES];
        assert_eq!(
            tf_session_entity_newest(s, 0, lanes.as_mut_ptr(), lanes.len(), &mut len),
            tf_result::TF_ERR_NOT_FOUND
        );
        assert_eq!(len, tickforge_shooter::lane::COUNT);
        assert_eq!(
            tf_session_update(s, f64::INFINITY),
            tf_result::TF_ERR_INVALID_ARGUMENT
        );
        // The end, once.
        assert_eq!(tf_session_disconnect(s, 5.3), tf_result::TF_OK);
        assert_eq!(tf_session_poll_event(s, &mut ev), tf_result::TF_OK);
        assert_eq!(ev.kind, tf_event_kind::TF_EVENT_DISCONNECTED);
        assert_eq!(ev.reason, tf_disconnect_reason::TF_REASON_CLIENT_CLOSED);
        assert!(!CStr::from_ptr(ev.text).to_bytes().is_empty());
        assert_eq!(tf_session_poll_event(s, &mut ev), tf_result::TF_OK);
        assert_eq!(ev.kind, tf_event_kind::TF_EVENT_NONE);
        tf_session_free(s);
    }
}

#[test]
fn socket_sessions_refuse_engine_calls() {
    let (r, s) = create(&token(160), c"ctf", TF_MODE_SOCKET);
    assert_eq!(r, tf_result::TF_OK);
    let mut buf = [0u8; 64];
    let mut len = 0;
    let mut state = tf_shooter_state::default();
    // SAFETY: a live session and valid buffers.
    unsafe {
        assert_eq!(tf_session_update(s, 5.0), tf_result::TF_OK);
        assert_eq!(
            tf_session_receive(s, 5.0, buf.as_ptr(), 10),
            tf_result::TF_ERR_WRONG_MODE
        );
        assert_eq!(
            tf_session_next_datagram(s, 5.0, buf.as_mut_ptr(), 64, &mut len),
            tf_result::TF_ERR_WRONG_MODE
        );
        assert_eq!(
            tf_shooter_entity_newest(s, 0, &mut state),
            tf_result::TF_ERR_WRONG_MODE,
            "a ctf session has no shooter players"
        );
        assert_eq!(
            tf_session_server_addr(s, buf.as_mut_ptr().cast(), 64),
            tf_result::TF_OK
        );
        assert_eq!(
            CStr::from_ptr(buf.as_ptr().cast()).to_str().unwrap(),
            "127.0.0.1:9"
        );
        tf_session_free(s);
    }
}

#[test]
fn a_panic_inside_is_a_code_and_poisons_the_session() {
    let (r, s) = create(&token(160), c"shooter", TF_MODE_ENGINE_IO);
    assert_eq!(r, tf_result::TF_OK);
    // SAFETY: a live session.
    unsafe {
        let r = with_session(s, |_| panic!("boom"));
        assert_eq!(r, tf_result::TF_ERR_PANIC);
        assert!(CStr::from_ptr(tf_last_error(s))
            .to_str()
            .unwrap()
            .contains("boom"));
        assert_eq!(tf_session_update(s, 6.0), tf_result::TF_ERR_PANIC);
        tf_session_free(s);
    }
    assert_eq!(guarded(|| panic!("bang")), tf_result::TF_ERR_PANIC);
    assert!(thread_error().contains("bang"));
}

#[test]
fn shooter_inputs_encode_as_the_game_decodes_them() {
    let mut out = [0u8; 16];
    let mut len = 0;
    // SAFETY: valid buffers.
    let r = unsafe {
        tf_shooter_encode_input(
            127,
            -3,
            TF_SHOOTER_FIRE,
            450.0,
            -30.0,
            out.as_mut_ptr(),
            16,
            &mut len,
        )
    };
    assert_eq!((r, len), (tf_result::TF_OK, TF_SHOOTER_INPUT_BYTES));
    let cmd = tickforge_shooter::cmd::decode(&out[..len]).unwrap();
    assert_eq!(
        (cmd.forward, cmd.side, cmd.buttons),
        (127, -3, TF_SHOOTER_FIRE)
    );
    assert_eq!(cmd.yaw, 16384, "450° is a quarter turn");
    assert_eq!(cmd.pitch, -5461);
    // SAFETY: valid buffers; too small is the test.
    let r = unsafe { tf_shooter_encode_input(0, 0, 0, 0.0, 0.0, out.as_mut_ptr(), 3, &mut len) };
    assert_eq!(r, tf_result::TF_ERR_BUFFER_TOO_SMALL);
    // SAFETY: as above.
    let r =
        unsafe { tf_shooter_encode_input(0, 0, 0, f32::NAN, 0.0, out.as_mut_ptr(), 16, &mut len) };
    assert_eq!(r, tf_result::TF_ERR_INVALID_ARGUMENT);
}

#[test]
fn every_code_has_a_message() {
    for code in -13..=0 {
        // SAFETY: static strings.
        let text = unsafe { CStr::from_ptr(tf_error_message(code)) };
        assert_ne!(text.to_bytes(), b"unknown error code", "{code}");
    }
    // SAFETY: a static string.
    assert_eq!(
        unsafe { CStr::from_ptr(tf_version()) }.to_str().unwrap(),
        env!("CARGO_PKG_VERSION")
    );
}
