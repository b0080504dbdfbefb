// Tickforge.cs: the C# binding of tickforge's client library (libtickforge_client_c), by
// P/Invoke. The file a Unity project drops into Assets/ (next to the native library in
// Assets/Plugins/<platform>/); it also builds with Mono's mcs and .NET. See
// docs/engines.md.
//
// It mirrors crates/client-c/include/tickforge.h: Native holds the raw entry points,
// Session the safe wrapper. Threading: one Session per thread (or one thread at a time);
// the library never calls back. Allocation: polling events, reading entities and sending
// inputs allocate nothing on the managed side (a game event's bytes are copied only when
// asked for).

using System;
using System.Diagnostics;
using System.Runtime.InteropServices;

namespace Tickforge
{
    /// <summary>What a call returns: Ok (0) or a negative error.</summary>
    public enum Result : int
    {
        Ok = 0,
        Null = -1,
        InvalidArgument = -2,
        BadToken = -3,
        TokenExpired = -4,
        UnknownGame = -5,
        Io = -6,
        WrongMode = -7,
        NotConnected = -8,
        NotFound = -9,
        BufferTooSmall = -10,
        MessageRefused = -11,
        Panic = -12,
        TooLarge = -13,
    }

    /// <summary>The kind of an Event.</summary>
    public enum EventKind : uint
    {
        None = 0,
        Welcome = 1,
        Epoch = 2,
        Game = 3,
        Snapshot = 4,
        Disconnected = 5,
    }

    /// <summary>Why a session ended.</summary>
    public enum DisconnectReason : uint
    {
        None = 0,
        TimedOut = 1,
        ConnectTimedOut = 2,
        ResponseTimedOut = 3,
        TokenExpired = 4,
        InvalidToken = 5,
        ServerFull = 6,
        Refused = 7,
        ServerClosed = 8,
        ClientClosed = 9,
        Replaced = 10,
        Misbehaved = 11,
        WrongSchema = 12,
        BadWelcome = 13,
    }

    /// <summary>How a session moves its datagrams.</summary>
    public enum Mode : uint
    {
        /// <summary>The session owns a non-blocking UDP socket; Update receives and sends.</summary>
        Socket = 0,
        /// <summary>The engine owns the socket: Receive each datagram, send NextDatagram's.</summary>
        EngineIo = 1,
    }

    /// <summary>tf_event: one event. Fields not named by its kind are 0.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Event
    {
        public EventKind Kind;
        public DisconnectReason Reason;
        public uint MatchId;
        public uint Epoch;
        public uint Tick;
        public uint InputAck;
        public ushort Seat;
        public ushort Seats;
        public ushort Entities;
        public ushort TickHz;
        /// <summary>Game: the bytes, valid until the next call on the session other than a read.</summary>
        public IntPtr Data;
        public UIntPtr Len;
        /// <summary>Disconnected: the reason in words (UTF-8, NUL-terminated).</summary>
        public IntPtr Text;

        /// <summary>A Game event's bytes, copied (allocates).</summary>
        public byte[] GameBytes()
        {
            var bytes = new byte[(int)Len];
            if (bytes.Length > 0) Marshal.Copy(Data, bytes, 0, bytes.Length);
            return bytes;
        }

        /// <summary>A Disconnected event's reason in words.</summary>
        public string ReasonText()
        {
            return Text == IntPtr.Zero ? "" : Marshal.PtrToStringAnsi(Text);
        }
    }

    /// <summary>tf_stats: the session's measurements.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Stats
    {
        public double RttMs;
        public double JitterMs;
        public double Loss;
        public double SnapshotJitterMs;
        public double InterpDelayTicks;
        public ulong Snapshots;
        public ulong BadSnapshots;
        public ulong Events;
        public ulong PacketsReceived;
        public ulong BytesReceived;
        public ulong PacketsSent;
        public ulong BytesSent;
        public ulong Inputs;
        public ulong EventsDropped;
        public ulong SendErrors;
        public uint NewestTick;
        public uint Epoch;
        public uint Connected;
        public uint Welcomed;
    }

    /// <summary>tf_shooter_state: one shooter player (metres, degrees).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ShooterState
    {
        public float X, Y, Z;
        public float Vx, Vy, Vz;
        public float YawDeg;
        public float PitchDeg;
        public uint Tick;
        public byte Flags;
        public byte Health;
        public byte Weapon;
        public byte Alive;
    }

    /// <summary>The raw C entry points (see tickforge.h for each one's contract).</summary>
    public static class Native
    {
        // libtickforge_client_c.so / .dylib, tickforge_client_c.dll; on iOS the static
        // library is linked into the player, which P/Invoke names "__Internal".
#if UNITY_IOS && !UNITY_EDITOR
        public const string Lib = "__Internal";
#else
        public const string Lib = "tickforge_client_c";
#endif

        public const int ShooterInputBytes = 7;
        public const byte ShooterJump = 1;
        public const byte ShooterFire = 2;
        public const byte ShooterCrouch = 4;
        public const byte ShooterOnGround = 1;
        public const byte ShooterCrouched = 2;
        public const byte ShooterAlive = 4;
        public const int MaxLanes = 16;
        public const int MaxDatagramBytes = 2048;

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_create(byte[] token, UIntPtr len,
            [MarshalAs(UnmanagedType.LPStr)] string game, uint mode, double nowS, out IntPtr session);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern void tf_session_free(IntPtr s);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_update(IntPtr s, double nowS);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_receive(IntPtr s, double nowS, byte[] bytes, UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_next_datagram(IntPtr s, double nowS, byte[] buf,
            UIntPtr cap, out UIntPtr outLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_server_addr(IntPtr s, byte[] buf, UIntPtr cap);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_send_input(IntPtr s, double nowS, byte[] bytes, UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_send_input_viewed(IntPtr s, double nowS, double viewTick,
            byte[] bytes, UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_send_message(IntPtr s, byte[] bytes, UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_poll_event(IntPtr s, out Event ev);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_entity_newest(IntPtr s, ushort id, int[] lanes,
            UIntPtr cap, out UIntPtr outN);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_shooter_entity_newest(IntPtr s, ushort id, out ShooterState state);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_render_tick(IntPtr s, double now, out double tick);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_server_tick(IntPtr s, double now, out double tick);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_entity_at(IntPtr s, ushort id, double renderTick,
            int[] lanes, UIntPtr cap, out UIntPtr outN);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_shooter_entity_at(IntPtr s, ushort id, double renderTick,
            out ShooterState state);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_shooter_encode_input(sbyte forward, sbyte side, byte buttons,
            float yawDeg, float pitchDeg, byte[] output, UIntPtr cap, out UIntPtr outLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_stats(IntPtr s, out Stats stats);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern Result tf_session_disconnect(IntPtr s, double nowS);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern IntPtr tf_last_error(IntPtr s);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern IntPtr tf_error_message(int code);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        public static extern IntPtr tf_version();
    }

    /// <summary>A failed call: its code and the library's message.</summary>
    public class TickforgeException : Exception
    {
        public readonly Result Code;

        public TickforgeException(Result code, string message)
            : base(message + " (" + code + ")")
        {
            Code = code;
        }
    }

    /// <summary>A monotonic clock in seconds, for the now arguments.</summary>
    public static class Clock
    {
        public static double Now()
        {
            return (double)Stopwatch.GetTimestamp() / Stopwatch.Frequency;
        }
    }

    /// <summary>
    /// One connection to a match: tf_session. Dispose it (it frees the native session);
    /// call Disconnect first to tell the server. One thread at a time.
    /// </summary>
    public sealed class Session : IDisposable
    {
        IntPtr handle;
        readonly byte[] input = new byte[Native.ShooterInputBytes];

        /// <summary>Connects with a connect token to a match of game ("shooter" or "ctf").</summary>
        public Session(byte[] token, string game, Mode mode, double now)
        {
            if (token == null) throw new ArgumentNullException("token");
            IntPtr h;
            var r = Native.tf_session_create(token, (UIntPtr)token.Length, game, (uint)mode, now, out h);
            if (r != Result.Ok) throw new TickforgeException(r, LastError(IntPtr.Zero));
            handle = h;
        }

        /// <summary>The library's version.</summary>
        public static string Version()
        {
            return Marshal.PtrToStringAnsi(Native.tf_version());
        }

        static string LastError(IntPtr s)
        {
            return Marshal.PtrToStringAnsi(Native.tf_last_error(s));
        }

        /// <summary>The message of this session's last failed call.</summary>
        public string LastError()
        {
            return LastError(Handle);
        }

        IntPtr Handle
        {
            get
            {
                if (handle == IntPtr.Zero) throw new ObjectDisposedException("Tickforge.Session");
                return handle;
            }
        }

        Result Check(Result r)
        {
            if (r != Result.Ok) throw new TickforgeException(r, LastError(handle));
            return r;
        }

        /// <summary>Receives, times out and sends (Socket mode); times out (EngineIo).</summary>
        public void Update(double now)
        {
            Check(Native.tf_session_update(Handle, now));
        }

        /// <summary>EngineIo: one datagram from the server.</summary>
        public void Receive(double now, byte[] datagram, int length)
        {
            Check(Native.tf_session_receive(Handle, now, datagram, (UIntPtr)length));
        }

        /// <summary>EngineIo: the next datagram to send into buf (MaxDatagramBytes suffice); its length, 0 when none.</summary>
        public int NextDatagram(double now, byte[] buf)
        {
            UIntPtr n;
            Check(Native.tf_session_next_datagram(Handle, now, buf, (UIntPtr)buf.Length, out n));
            return (int)n;
        }

        /// <summary>The next event; false when there is none.</summary>
        public bool PollEvent(out Event ev)
        {
            Check(Native.tf_session_poll_event(Handle, out ev));
            return ev.Kind != EventKind.None;
        }

        /// <summary>Sends this tick's input bytes; false when not connected (nothing sent).</summary>
        public bool SendInput(double now, byte[] bytes, int length)
        {
            var r = Native.tf_session_send_input(Handle, now, bytes, (UIntPtr)length);
            if (r == Result.NotConnected) return false;
            Check(r);
            return true;
        }

        /// <summary>Sends a shooter input: stick −127..127, TF_SHOOTER_* buttons, view in degrees.</summary>
        public bool SendShooterInput(double now, sbyte forward, sbyte side, byte buttons, float yawDeg, float pitchDeg)
        {
            UIntPtr n;
            Check(Native.tf_shooter_encode_input(forward, side, buttons, yawDeg, pitchDeg, input,
                (UIntPtr)input.Length, out n));
            return SendInput(now, input, (int)n);
        }

        /// <summary>Queues a reliable game message.</summary>
        public void SendMessage(byte[] bytes)
        {
            Check(Native.tf_session_send_message(Handle, bytes, (UIntPtr)bytes.Length));
        }

        /// <summary>
        /// Entity id's newest lanes into lanes (MaxLanes suffice); their count, or -1 when not in
        /// view. Newest, not interpolated.
        /// </summary>
        public int EntityNewest(ushort id, int[] lanes)
        {
            UIntPtr n;
            var r = Native.tf_session_entity_newest(Handle, id, lanes, (UIntPtr)lanes.Length, out n);
            if (r == Result.NotFound) return -1;
            Check(r);
            return (int)n;
        }

        /// <summary>The shooter's player id (its seat), newest state; false when not in view.</summary>
        public bool ShooterEntityNewest(ushort id, out ShooterState state)
        {
            var r = Native.tf_shooter_entity_newest(Handle, id, out state);
            if (r == Result.NotFound) return false;
            Check(r);
            return true;
        }

        /// <summary>
        /// The tick to render the world at, now: the server's estimated tick less the one-way
        /// trip and the adaptive interpolation delay. Null before the first snapshot.
        /// </summary>
        public double? RenderTick(double now)
        {
            double tick;
            var r = Native.tf_session_render_tick(Handle, now, out tick);
            if (r == Result.NotFound) return null;
            Check(r);
            return tick;
        }

        /// <summary>The shooter's player id interpolated at renderTick; false when not in view.</summary>
        public bool ShooterEntityAt(ushort id, double renderTick, out ShooterState state)
        {
            var r = Native.tf_shooter_entity_at(Handle, id, renderTick, out state);
            if (r == Result.NotFound) return false;
            Check(r);
            return true;
        }

        /// <summary>Round trip, jitter, loss, packets and bytes.</summary>
        public Stats Stats()
        {
            Stats st;
            Check(Native.tf_session_stats(Handle, out st));
            return st;
        }

        /// <summary>Tells the server; Disconnected(ClientClosed) comes out of the next poll.</summary>
        public void Disconnect(double now)
        {
            Check(Native.tf_session_disconnect(Handle, now));
        }

        /// <summary>Frees the native session.</summary>
        public void Dispose()
        {
            if (handle != IntPtr.Zero)
            {
                Native.tf_session_free(handle);
                handle = IntPtr.Zero;
            }
            GC.SuppressFinalize(this);
        }

        ~Session()
        {
            // A finalizer runs on another thread: only the free, which touches nothing shared.
            if (handle != IntPtr.Zero) Native.tf_session_free(handle);
        }
    }
}
