/* play.c: connects to a tickforge shooter match with a connect token, plays for a few
 * seconds (one input per tick: run forward, turning), prints what it sees, disconnects.
 *
 *   cc -std=c99 -I crates/client-c/include crates/client-c/examples/c/play.c \
 *      -L target/debug -ltickforge_client_c -Wl,-rpath,target/debug -o play
 *   ./play token.bin [seconds]
 *
 * token.bin holds the 2048-byte connect token a matchmaker handed out (tickforge's
 * POST /matches gives it base64-encoded). Exits 0 when it was welcomed, received
 * snapshots at 90% of the tick rate or better, and disconnected cleanly. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tickforge.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_until(double at) {
    double wait = at - now_s();
    if (wait <= 0) return;
    struct timespec t;
    t.tv_sec = (time_t)wait;
    t.tv_nsec = (long)((wait - (double)t.tv_sec) * 1e9);
    nanosleep(&t, NULL);
}

static int check(tf_session *s, tf_result r, const char *what) {
    if (r == TF_OK) return 1;
    fprintf(stderr, "play: %s: %s (%d: %s)\n", what, tf_last_error(s), (int)r,
            tf_error_message(r));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TOKEN_FILE [SECONDS]\n", argv[0]);
        return 2;
    }
    double play_for = argc > 2 ? atof(argv[2]) : 2.0;
    uint8_t token[4096];
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    size_t len = fread(token, 1, sizeof token, f);
    fclose(f);

    printf("tickforge %s\n", tf_version());
    tf_session *s = NULL;
    if (!check(NULL, tf_session_create(token, len, "shooter", TF_MODE_SOCKET, now_s(), &s),
               "create"))
        return 1;

    int welcomed = 0, clean = 0, ended = 0;
    unsigned seat = 0, tick_hz = 128;
    unsigned long snapshots = 0, game_events = 0;
    uint32_t last_tick = 0;
    double start = now_s(), welcomed_at = 0, next = start, yaw = 0;
    uint8_t input[TF_SHOOTER_INPUT_BYTES];
    size_t input_len = 0;
    tf_event ev;

    while (!ended) {
        double now = now_s();
        if (!welcomed && now - start > 5.0) {
            fprintf(stderr, "play: no welcome in 5 s\n");
            break;
        }
        if (welcomed && now - welcomed_at >= play_for) break;
        if (!check(s, tf_session_update(s, now), "update")) break;
        for (;;) {
            if (!check(s, tf_session_poll_event(s, &ev), "poll")) break;
            if (ev.kind == TF_EVENT_NONE) break;
            switch (ev.kind) {
            case TF_EVENT_WELCOME:
                welcomed = 1;
                welcomed_at = now;
                seat = ev.seat;
                tick_hz = ev.tick_hz;
                printf("welcome match=%u seat=%u seats=%u entities=%u tick_hz=%u epoch=%u\n",
                       ev.match_id, ev.seat, ev.seats, ev.entities, ev.tick_hz, ev.epoch);
                break;
            case TF_EVENT_EPOCH:
                printf("epoch %u\n", ev.epoch);
                break;
            case TF_EVENT_GAME:
                game_events++;
                break;
            case TF_EVENT_SNAPSHOT:
                snapshots++;
                last_tick = ev.tick;
                break;
            case TF_EVENT_DISCONNECTED:
                printf("disconnected early: reason=%u (%s)\n", ev.reason, ev.text);
                ended = 1;
                break;
            default:
                break;
            }
        }
        if (welcomed && !ended) {
            yaw += 90.0 / tick_hz; /* a quarter turn a second */
            if (check(s, tf_shooter_encode_input(127, 0, 0, (float)yaw, 0.0f, input,
                                                 sizeof input, &input_len),
                      "encode"))
            {
                /* The input names the moment it was made at: the render tick, the world
                 * the player was shown (where the server tests its shots). */
                double shown;
                double t = now_s();
                if (tf_session_render_tick(s, t, &shown) == TF_OK)
                    check(s, tf_session_send_input_viewed(s, t, shown, input, input_len),
                          "input");
                else
                    check(s, tf_session_send_input(s, t, input, input_len), "input");
            }
        }
        next += 1.0 / tick_hz;
        if (next < now_s()) next = now_s();
        sleep_until(next);
    }
    double played = welcomed ? now_s() - welcomed_at : 0;

    tf_shooter_state me;
    if (welcomed && tf_shooter_entity_newest(s, (uint16_t)seat, &me) == TF_OK)
        printf("me seat=%u at (%.2f, %.2f, %.2f) yaw=%.1f health=%u alive=%u tick=%u\n", seat,
               me.x, me.y, me.z, me.yaw_deg, me.health, me.alive, me.tick);
    double shown;
    if (welcomed && tf_session_render_tick(s, now_s(), &shown) == TF_OK &&
        tf_shooter_entity_at(s, (uint16_t)seat, shown, &me) == TF_OK)
        printf("me shown at tick %.2f: (%.2f, %.2f, %.2f)\n", shown, me.x, me.y, me.z);
    tf_stats st;
    if (check(s, tf_session_stats(s, &st), "stats"))
        printf("stats rtt_ms=%.2f jitter_ms=%.2f loss=%.3f interp_delay_ticks=%.2f "
               "packets_in=%llu bytes_in=%llu packets_out=%llu bytes_out=%llu inputs=%llu\n",
               st.rtt_ms, st.jitter_ms, st.loss, st.interp_delay_ticks,
               (unsigned long long)st.packets_received,
               (unsigned long long)st.bytes_received, (unsigned long long)st.packets_sent,
               (unsigned long long)st.bytes_sent, (unsigned long long)st.inputs);
    printf("snapshots %lu in %.2f s (last tick %u), game events %lu\n", snapshots, played,
           last_tick, game_events);

    if (!ended && check(s, tf_session_disconnect(s, now_s()), "disconnect")) {
        while (tf_session_poll_event(s, &ev) == TF_OK && ev.kind != TF_EVENT_NONE) {
            if (ev.kind == TF_EVENT_DISCONNECTED) {
                clean = ev.reason == TF_REASON_CLIENT_CLOSED;
                printf("disconnected reason=%u (%s)\n", ev.reason, ev.text);
            }
        }
    }
    tf_session_free(s);

    printf("RESULT lang=c welcome=%d snapshots=%lu seconds=%.3f tick_hz=%u clean=%d\n",
           welcomed, snapshots, played, tick_hz, clean);
    if (!welcomed || !clean || (double)snapshots < 0.9 * tick_hz * played) {
        fprintf(stderr, "play: FAILED\n");
        return 1;
    }
    return 0;
}
