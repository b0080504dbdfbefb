//! NUMA topology: which CPUs share a memory node, where a match runs, and keeping a
//! worker's memory on its node.
//!
//! The topology is read from sysfs (`/sys/devices/system/node/node<N>/cpulist`). A host
//! without that tree (one node, or a kernel built without NUMA) is one node holding every
//! online CPU, so callers never special-case small machines.
//!
//! Placement follows VALORANT's rule: the match id modulo the number of usable nodes picks
//! the node, so matches spread evenly over memory controllers; inside the node, the least
//! used allowed CPU takes it ([`Placer`]), or, without load counts, the next one in turn
//! ([`Topology::place`]).
//!
//! Memory stays local without any call here: a worker pinned to a CPU of the node first
//! touches its buffers there, and Linux's default policy allocates a page on the node of
//! the CPU that first touches it. [`prefer_node_memory`] also asks for that node
//! explicitly, which helps when the scheduler moved the thread before it was pinned; its
//! failure (a container's seccomp filter, a kernel without NUMA) costs nothing but that.

use std::io;
use std::path::{Path, PathBuf};

use crate::cpu;

/// Highest CPU number accepted in a cpulist, exclusive. Linux's `NR_CPUS` tops out at
/// 8192; the margin keeps a garbage range like `0-4000000000` from allocating gigabytes.
pub const MAX_CPUS: usize = 1 << 16;

/// Where the NUMA nodes live under the sysfs root.
const NODE_DIR: &str = "sys/devices/system/node";
/// The online CPUs, used when there is no node tree.
const ONLINE_FILE: &str = "sys/devices/system/cpu/online";

/// Text that is not a cpulist (`0-3,8-11`, `5`, or empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// An item is neither `N` nor `N-M` with decimal numbers.
    #[error("`{item}` is not a CPU number or a range N-M")]
    BadItem {
        /// The offending item, as written.
        item: String,
    },
    /// A range ends before it starts.
    #[error("range `{item}` ends before it starts")]
    Backwards {
        /// The offending item, as written.
        item: String,
    },
    /// A CPU number at or above [`MAX_CPUS`].
    #[error("CPU {cpu} is beyond the {MAX_CPUS} this reader accepts")]
    TooLarge {
        /// The offending number.
        cpu: usize,
    },
}

/// Why the topology could not be read or a match not placed.
#[derive(Debug, thiserror::Error)]
pub enum NumaError {
    /// A sysfs file or directory could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// A sysfs file did not hold a cpulist.
    #[error("{}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong with its text.
        source: CpuListError,
    },
    /// None of the CPUs a match may use belongs to a node.
    #[error("none of the allowed CPUs {allowed:?} belongs to a NUMA node")]
    NoUsableCpu {
        /// The CPUs the caller allowed.
        allowed: Vec<usize>,
    },
    /// The thread could not be pinned to the node's CPUs.
    #[error("pinning to the CPUs of NUMA node {node}")]
    Pin {
        /// The node id.
        node: usize,
        /// What the OS said.
        source: io::Error,
    },
    /// The node asked for does not exist.
    #[error("no NUMA node {node}")]
    NoSuchNode {
        /// The node id asked for.
        node: usize,
    },
}

/// One memory node and the CPUs closest to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    /// The kernel's node number (`node<id>` in sysfs).
    pub id: usize,
    /// Its logical CPUs, ascending; empty for a memory-only node.
    pub cpus: Vec<usize>,
}

/// The host's NUMA nodes, ordered by id. Always at least one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<NumaNode>,
}

/// Where a match runs: a node and one of its CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The node's id ([`NumaNode::id`]).
    pub node: usize,
    /// The logical CPU, one of the caller's allowed CPUs on that node.
    pub cpu: usize,
}

/// Parses the kernel's cpulist format: comma-separated `N` or `N-M` (inclusive), for
/// example `0-3,8-11`. Empty text (or only white space) is an empty list. The result is
/// ascending without duplicates.
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, CpuListError> {
    let mut cpus = Vec::new();
    let text = text.trim();
    if text.is_empty() {
        return Ok(cpus);
    }
    for item in text.split(',') {
        let item = item.trim();
        let bad = || CpuListError::BadItem {
            item: item.to_string(),
        };
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?),
            None => {
                let n = number(item).ok_or_else(bad)?;
                (n, n)
            }
        };
        if last < first {
            return Err(CpuListError::Backwards {
                item: item.to_string(),
            });
        }
        if last >= MAX_CPUS {
            return Err(CpuListError::TooLarge { cpu: last });
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A decimal number made of digits only (`str::parse` would also take a leading `+`).
fn number(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl Topology {
    /// Reads this host's topology from `/sys`. Call once at start, before spawning workers.
    pub fn read() -> Result<Topology, NumaError> {
        Topology::read_from(Path::new("/"))
    }

    /// Reads the topology from a sysfs tree under `root` (`/` on a real host; a temporary
    /// directory in tests).
    ///
    /// Without `sys/devices/system/node` (or with no `node<N>` in it) the host is one node
    /// holding the CPUs in `sys/devices/system/cpu/online`, or, without that file either,
    /// CPUs `0..available_parallelism`.
    pub fn read_from(root: &Path) -> Result<Topology, NumaError> {
        let dir = root.join(NODE_DIR);
        let mut nodes = Vec::new();
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry.map_err(|source| NumaError::Read {
                        path: dir.clone(),
                        source,
                    })?;
                    let name = entry.file_name();
                    let Some(id) = name.to_str().and_then(|n| n.strip_prefix("node")) else {
                        continue;
                    };
                    // `node` alone, or names like `node_possible` files, are not nodes.
                    let Some(id) = number(id) else { continue };
                    let path = entry.path().join("cpulist");
                    nodes.push(NumaNode {
                        id,
                        cpus: read_cpulist(&path)?,
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(NumaError::Read { path: dir, source }),
        }
        if nodes.is_empty() {
            return Ok(Topology::single_node(online_cpus(root)?));
        }
        nodes.sort_by_key(|n| n.id);
        Ok(Topology { nodes })
    }

    /// One node, id 0, holding `cpus`: the shape of a host without NUMA.
    pub fn single_node(mut cpus: Vec<usize>) -> Topology {
        cpus.sort_unstable();
        cpus.dedup();
        Topology {
            nodes: vec![NumaNode { id: 0, cpus }],
        }
    }

    /// The nodes, ordered by id; memory-only nodes (no CPUs) included.
    pub fn nodes(&self) -> &[NumaNode] {
        &self.nodes
    }

    /// The node with id `id`.
    pub fn node(&self, id: usize) -> Option<&NumaNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The id of the node holding logical CPU `cpu`, or `None` for a CPU no node lists.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.nodes
            .iter()
            .find(|n| n.cpus.binary_search(&cpu).is_ok())
            .map(|n| n.id)
    }

    /// Places match `match_id` without load counts: the match id modulo the number of
    /// nodes that hold an allowed CPU picks the node, and the next quotient picks the CPU
    /// among the node's allowed ones in turn. Placing ids in ascending order with no
    /// removals spreads matches exactly like [`Placer`]; use [`Placer`] when matches end.
    pub fn place(&self, match_id: u32, allowed_cpus: &[usize]) -> Result<Placement, NumaError> {
        let usable = self.usable(allowed_cpus);
        if usable.is_empty() {
            return Err(NumaError::NoUsableCpu {
                allowed: allowed_cpus.to_vec(),
            });
        }
        let id = match_id as usize;
        let (node, cpus) = &usable[id % usable.len()];
        let cpu = cpus[(id / usable.len()) % cpus.len()];
        Ok(Placement { node: *node, cpu })
    }

    /// Pins the calling thread to every CPU of node `node`, so the scheduler may move it
    /// only between CPUs that share its memory. A worker that owns one CPU pins to it
    /// with [`cpu::pin_current_thread`] instead.
    pub fn pin_current_thread_to_node(&self, node: usize) -> Result<(), NumaError> {
        let n = self.node(node).ok_or(NumaError::NoSuchNode { node })?;
        pin_current_thread_to(&n.cpus).map_err(|source| NumaError::Pin { node, source })
    }

    /// Each node with at least one allowed CPU, with those CPUs ascending.
    fn usable(&self, allowed_cpus: &[usize]) -> Vec<(usize, Vec<usize>)> {
        self.nodes
            .iter()
            .filter_map(|n| {
                let cpus: Vec<usize> = n
                    .cpus
                    .iter()
                    .copied()
                    .filter(|c| allowed_cpus.contains(c))
                    .collect();
                (!cpus.is_empty()).then_some((n.id, cpus))
            })
            .collect()
    }
}

/// Places matches by VALORANT's rule and counts how many each CPU holds, so a new match
/// goes to the least used allowed CPU of its node. Lives with whoever creates matches
/// (the host's admission), not in a worker's frame.
#[derive(Clone, Debug)]
pub struct Placer {
    /// Per usable node: its id and `(cpu, matches placed there)`, CPUs ascending.
    nodes: Vec<(usize, Vec<(usize, u32)>)>,
}

impl Placer {
    /// A placer over the nodes of `topology` that hold any of `allowed_cpus` (usually
    /// [`cpu::allowed_cores`]).
    pub fn new(topology: &Topology, allowed_cpus: &[usize]) -> Result<Placer, NumaError> {
        let nodes: Vec<_> = topology
            .usable(allowed_cpus)
            .into_iter()
            .map(|(id, cpus)| (id, cpus.into_iter().map(|c| (c, 0)).collect()))
            .collect();
        if nodes.is_empty() {
            return Err(NumaError::NoUsableCpu {
                allowed: allowed_cpus.to_vec(),
            });
        }
        Ok(Placer { nodes })
    }

    /// Places match `match_id`: node `match_id % usable nodes`, then its CPU holding the
    /// fewest matches (the lowest-numbered on a tie), and counts the match there.
    pub fn place(&mut self, match_id: u32) -> Placement {
        let count = self.nodes.len();
        let (node, cpus) = &mut self.nodes[match_id as usize % count];
        // `Placer::new` keeps only nodes with at least one CPU, so a minimum exists.
        let slot = cpus
            .iter_mut()
            .min_by_key(|(cpu, used)| (*used, *cpu))
            .expect("every usable node has a CPU");
        slot.1 += 1;
        Placement {
            node: *node,
            cpu: slot.0,
        }
    }

    /// Forgets one match placed at `placement` (the match ended or moved). Unknown
    /// placements are ignored.
    pub fn release(&mut self, placement: Placement) {
        let found = self
            .nodes
            .iter_mut()
            .filter(|(id, _)| *id == placement.node)
            .flat_map(|(_, cpus)| cpus.iter_mut())
            .find(|(cpu, _)| *cpu == placement.cpu);
        if let Some((_, used)) = found {
            *used = used.saturating_sub(1);
        }
    }

    /// Matches currently counted on `cpu`.
    pub fn matches_on(&self, cpu: usize) -> u32 {
        self.nodes
            .iter()
            .flat_map(|(_, cpus)| cpus.iter())
            .find(|(c, _)| *c == cpu)
            .map_or(0, |(_, used)| *used)
    }
}

/// Pins the calling thread to the set `cpus` (one CPU or a node's worth). `Unsupported` on
/// the portable path, as [`cpu::pin_current_thread`] is.
#[cfg(not(linux_io))]
pub fn pin_current_thread_to(cpus: &[usize]) -> io::Result<()> {
    match cpus {
        [one] => cpu::pin_current_thread(*one),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "pinning a thread to CPUs is for the Linux production path; this is a development build",
        )),
    }
}

/// Pins the calling thread to the set `cpus` (one CPU or a node's worth).
#[cfg(linux_io)]
pub fn pin_current_thread_to(cpus: &[usize]) -> io::Result<()> {
    if let [one] = cpus {
        return cpu::pin_current_thread(*one);
    }
    if cpus.is_empty() || cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty CPU set or CPU number out of range",
        ));
    }
    // SAFETY: cpu_set_t is plain data; every index is below CPU_SETSIZE (checked above);
    // sched_setaffinity only reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `MPOL_PREFERRED` from linux/mempolicy.h: allocate on the given node while it has free
/// pages, elsewhere after that (never an allocation failure, unlike `MPOL_BIND`).
#[cfg(linux_io)]
const MPOL_PREFERRED: libc::c_int = 1;
/// Nodes the mask below can name.
#[cfg(linux_io)]
const MASK_NODES: usize = 1024;
#[cfg(linux_io)]
const MASK_WORDS: usize = MASK_NODES / 64;

/// Asks Linux to allocate the calling thread's new pages on node `node`
/// (`set_mempolicy(MPOL_PREFERRED)`). Call once from a worker thread right after pinning
/// it, before it allocates its buffers.
///
/// An error is harmless and should be logged, not acted on: pinning plus Linux's default
/// first-touch policy already keeps a pinned worker's pages local; this call only covers
/// pages touched before the pin took hold. It fails where the syscall is filtered
/// (containers) or the kernel has no NUMA (`ENOSYS`), and for a node beyond 1023.
#[cfg(linux_io)]
pub fn prefer_node_memory(node: usize) -> io::Result<()> {
    if node >= MASK_NODES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NUMA node number out of range",
        ));
    }
    let mut mask = [0 as libc::c_ulong; MASK_WORDS];
    mask[node / 64] |= 1 << (node % 64);
    // The kernel reads `maxnode - 1` bits (a long-standing off-by-one that numactl also
    // passes `+ 1` for).
    let maxnode = (MASK_NODES + 1) as libc::c_ulong;
    // SAFETY: the mask is a live array of MASK_WORDS longs, which covers the
    // `maxnode - 1` bits the kernel reads; the call changes only this thread's policy.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            MPOL_PREFERRED,
            mask.as_ptr(),
            maxnode,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `Unsupported` on the portable path: no memory policy outside Linux.
#[cfg(not(linux_io))]
pub fn prefer_node_memory(_node: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a NUMA memory policy is for the Linux production path; this is a development build",
    ))
}

fn read_cpulist(path: &Path) -> Result<Vec<usize>, NumaError> {
    let text = std::fs::read_to_string(path).map_err(|source| NumaError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_cpulist(&text).map_err(|source| NumaError::Parse {
        path: path.to_owned(),
        source,
    })
}

fn online_cpus(root: &Path) -> Result<Vec<usize>, NumaError> {
    let path = root.join(ONLINE_FILE);
    match read_cpulist(&path) {
        Ok(cpus) if !cpus.is_empty() => Ok(cpus),
        Err(NumaError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Ok(fallback_cpus())
        }
        Ok(_) => Ok(fallback_cpus()),
        Err(e) => Err(e),
    }
}

fn fallback_cpus() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs root in a fresh temporary directory, removed on drop.
    struct FakeSys(PathBuf);

    impl FakeSys {
        fn new(name: &str) -> FakeSys {
            let dir = std::env::temp_dir().join(format!(
                "tickforge-numa-{name}-{}-{:x}",
                std::process::id(),
                u64::from_le_bytes(crate::entropy::random_bytes())
            ));
            std::fs::create_dir_all(&dir).unwrap();
            FakeSys(dir)
        }

        fn write(&self, rel: &str, text: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn cpulist_ranges_singles_and_empty() {
        assert_eq!(
            parse_cpulist("0-3,8-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(parse_cpulist("7,2,2-3").unwrap(), vec![2, 3, 7]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn cpulist_garbage_is_a_typed_error() {
        for bad in ["x", "1-", "-1", "1,,2", "+3", "1-2-3", "0x1"] {
            assert!(
                matches!(parse_cpulist(bad), Err(CpuListError::BadItem { .. })),
                "{bad}"
            );
        }
        assert_eq!(
            parse_cpulist("4-2"),
            Err(CpuListError::Backwards {
                item: "4-2".to_string()
            })
        );
        assert_eq!(
            parse_cpulist("0-4000000000"),
            Err(CpuListError::TooLarge { cpu: 4_000_000_000 })
        );
    }

    #[test]
    fn garbage_in_sysfs_names_the_file() {
        let sys = FakeSys::new("garbage");
        sys.write("sys/devices/system/node/node0/cpulist", "0-1,zz\n");
        let err = Topology::read_from(&sys.0).unwrap_err();
        assert!(matches!(err, NumaError::Parse { .. }), "{err:?}");
        // The file is this layer's context; what is wrong with it is its source's.
        let text = err.to_string();
        assert!(text.contains("node0/cpulist"), "{text}");
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert!(
            source.contains("`zz`") && !text.contains("`zz`"),
            "{text}: {source}"
        );
    }

    #[test]
    fn fake_two_node_tree() {
        let sys = FakeSys::new("two");
        sys.write("sys/devices/system/node/node0/cpulist", "0-1,4-5\n");
        sys.write("sys/devices/system/node/node1/cpulist", "2-3,6-7\n");
        // A sysfs attribute file is not a node; a memory-only node is listed, never used.
        sys.write("sys/devices/system/node/possible", "0-2\n");
        sys.write("sys/devices/system/node/node2/cpulist", "\n");
        let t = Topology::read_from(&sys.0).unwrap();
        let ids: Vec<usize> = t.nodes().iter().map(|n| n.id).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(t.nodes()[1].cpus, vec![2, 3, 6, 7]);
        assert_eq!(t.node_of_cpu(5), Some(0));
        assert_eq!(t.node_of_cpu(6), Some(1));
        assert_eq!(t.node_of_cpu(99), None);
    }

    #[test]
    fn missing_tree_is_one_node_of_online_cpus() {
        let sys = FakeSys::new("online");
        sys.write("sys/devices/system/cpu/online", "0-5\n");
        let t = Topology::read_from(&sys.0).unwrap();
        assert_eq!(t, Topology::single_node(vec![0, 1, 2, 3, 4, 5]));

        let empty = FakeSys::new("empty");
        let t = Topology::read_from(&empty.0).unwrap();
        assert_eq!(t.nodes().len(), 1);
        assert_eq!(t.nodes()[0].cpus, fallback_cpus());
    }

    #[test]
    fn this_host_reads() {
        let t = Topology::read().unwrap();
        assert!(!t.nodes().is_empty());
        let allowed = cpu::allowed_cores();
        t.place(1, &allowed).unwrap();
    }

    fn two_nodes() -> Topology {
        Topology {
            nodes: vec![
                NumaNode {
                    id: 0,
                    cpus: vec![0, 1, 4, 5],
                },
                NumaNode {
                    id: 1,
                    cpus: vec![2, 3, 6, 7],
                },
                NumaNode {
                    id: 2,
                    cpus: vec![],
                },
            ],
        }
    }

    #[test]
    fn placement_by_match_id_mod_nodes() {
        let t = two_nodes();
        let all: Vec<usize> = (0..8).collect();
        let placed: Vec<Placement> = (0..6).map(|id| t.place(id, &all).unwrap()).collect();
        let nodes: Vec<usize> = placed.iter().map(|p| p.node).collect();
        // The memory-only node 2 is never chosen.
        assert_eq!(nodes, vec![0, 1, 0, 1, 0, 1]);
        let cpus: Vec<usize> = placed.iter().map(|p| p.cpu).collect();
        assert_eq!(cpus, vec![0, 2, 1, 3, 4, 6]);
        // Only node 1 allowed: every match lands there, on allowed CPUs only.
        for id in 0..4 {
            let p = t.place(id, &[3, 7]).unwrap();
            assert_eq!(p.node, 1);
            assert!(p.cpu == 3 || p.cpu == 7);
        }
        assert!(matches!(
            t.place(1, &[42]),
            Err(NumaError::NoUsableCpu { .. })
        ));
    }

    #[test]
    fn placer_takes_the_least_used_cpu_of_the_node() {
        let t = two_nodes();
        let mut p = Placer::new(&t, &[0, 1, 2, 3]).unwrap();
        assert_eq!(p.place(0), Placement { node: 0, cpu: 0 });
        assert_eq!(p.place(2), Placement { node: 0, cpu: 1 });
        assert_eq!(p.place(4), Placement { node: 0, cpu: 0 });
        assert_eq!(p.place(1), Placement { node: 1, cpu: 2 });
        assert_eq!(p.matches_on(0), 2);
        p.release(Placement { node: 0, cpu: 0 });
        p.release(Placement { node: 0, cpu: 0 });
        // CPU 0 is now the least used again.
        assert_eq!(p.place(6), Placement { node: 0, cpu: 0 });
        p.release(Placement { node: 9, cpu: 9 });
        assert!(Placer::new(&t, &[]).is_err());
    }

    #[cfg(linux_io)]
    #[test]
    fn pinning_to_a_node_and_preferring_its_memory_never_panic() {
        let t = Topology::read().unwrap();
        let node = t.node_of_cpu(cpu::allowed_cores()[0]).unwrap();
        std::thread::spawn(move || {
            t.pin_current_thread_to_node(node).unwrap();
            // Filtered or missing NUMA support is an error, never a panic.
            let _ = prefer_node_memory(node);
            assert!(prefer_node_memory(MASK_NODES).is_err());
            assert!(t.pin_current_thread_to_node(4096).is_err());
            assert!(pin_current_thread_to(&[]).is_err());
        })
        .join()
        .unwrap();
    }
}
