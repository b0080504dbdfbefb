// Play.cs: connects to a tickforge shooter match with a connect token, plays a few seconds
// (one input per tick: run forward, turning), prints what it sees, disconnects.
//
//   mcs -out:Play.exe crates/client-c/bindings/csharp/Tickforge.cs crates/client-c/examples/csharp/Play.cs
//   LD_LIBRARY_PATH=target/debug mono Play.exe token.bin [seconds]
//
// Exits 0 when welcomed, snapshots came at 90% of the tick rate or better, and the
// disconnect was clean.

using System;
using System.Globalization;
using System.IO;
using System.Threading;
using Tickforge;

public static class Play
{
    public static int Main(string[] args)
    {
        if (args.Length < 1)
        {
            Console.Error.WriteLine("usage: Play.exe TOKEN_FILE [SECONDS]");
            return 2;
        }
        double playFor = args.Length > 1 ? double.Parse(args[1], CultureInfo.InvariantCulture) : 2.0;
        byte[] token = File.ReadAllBytes(args[0]);
        Console.WriteLine("tickforge " + Session.Version());

        bool welcomed = false, clean = false, ended = false;
        ushort seat = 0;
        int tickHz = 128;
        long snapshots = 0, gameEvents = 0;
        double start = Clock.Now(), welcomedAt = 0, next = start, yaw = 0;
        Event ev;
        using (var s = new Session(token, "shooter", Mode.Socket, start))
        {
            while (!ended)
            {
                double now = Clock.Now();
                if (!welcomed && now - start > 5.0)
                {
                    Console.Error.WriteLine("play: no welcome in 5 s");
                    break;
                }
                if (welcomed && now - welcomedAt >= playFor) break;
                s.Update(now);
                while (s.PollEvent(out ev))
                {
                    switch (ev.Kind)
                    {
                        case EventKind.Welcome:
                            welcomed = true;
                            welcomedAt = now;
                            seat = ev.Seat;
                            tickHz = ev.TickHz;
                            Console.WriteLine(string.Format(
                                "welcome match={0} seat={1} seats={2} entities={3} tick_hz={4} epoch={5}",
                                ev.MatchId, ev.Seat, ev.Seats, ev.Entities, ev.TickHz, ev.Epoch));
                            break;
                        case EventKind.Epoch:
                            Console.WriteLine("epoch " + ev.Epoch);
                            break;
                        case EventKind.Game:
                            gameEvents++;
                            break;
                        case EventKind.Snapshot:
                            snapshots++;
                            break;
                        case EventKind.Disconnected:
                            Console.WriteLine("disconnected early: reason=" + (uint)ev.Reason + " (" + ev.ReasonText() + ")");
                            ended = true;
                            break;
                    }
                }
                if (welcomed && !ended)
                {
                    yaw += 90.0 / tickHz;
                    s.SendShooterInput(Clock.Now(), 127, 0, 0, (float)yaw, 0f);
                }
                next += 1.0 / tickHz;
                double wait = next - Clock.Now();
                if (wait > 0) Thread.Sleep(TimeSpan.FromTicks((long)(wait * TimeSpan.TicksPerSecond)));
                else next = Clock.Now();
            }
            double played = welcomed ? Clock.Now() - welcomedAt : 0;

            ShooterState me;
            if (welcomed && s.ShooterEntityNewest(seat, out me))
                Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
                    "me seat={0} at ({1:F2}, {2:F2}, {3:F2}) yaw={4:F1} health={5} alive={6} tick={7}",
                    seat, me.X, me.Y, me.Z, me.YawDeg, me.Health, me.Alive, me.Tick));
            var st = s.Stats();
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
                "stats rtt_ms={0:F2} jitter_ms={1:F2} loss={2:F3} packets_in={3} bytes_in={4} packets_out={5} bytes_out={6} inputs={7}",
                st.RttMs, st.JitterMs, st.Loss, st.PacketsReceived, st.BytesReceived, st.PacketsSent, st.BytesSent, st.Inputs));
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
                "snapshots {0} in {1:F2} s, game events {2}", snapshots, played, gameEvents));

            if (!ended)
            {
                s.Disconnect(Clock.Now());
                while (s.PollEvent(out ev))
                {
                    if (ev.Kind == EventKind.Disconnected)
                    {
                        clean = ev.Reason == DisconnectReason.ClientClosed;
                        Console.WriteLine("disconnected reason=" + (uint)ev.Reason + " (" + ev.ReasonText() + ")");
                    }
                }
            }
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
                "RESULT lang=csharp welcome={0} snapshots={1} seconds={2:F3} tick_hz={3} clean={4}",
                welcomed ? 1 : 0, snapshots, played, tickHz, clean ? 1 : 0));
            if (!welcomed || !clean || snapshots < 0.9 * tickHz * played)
            {
                Console.Error.WriteLine("play: FAILED");
                return 1;
            }
        }
        return 0;
    }
}
