//! The TUN device: creating it (the one `ioctl` the crate needs, and so its only unsafe code),
//! giving it an address, and moving whole IP packets in and out of it.
//!
//! Addresses and link state are set by running `ip` (iproute2) rather than by more ioctls or
//! netlink: it is on every machine that has TUN, it keeps the unsafe surface to one call, and its
//! error messages are the ones people know.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

/// Interface names are at most 15 bytes (IFNAMSIZ less the terminating zero).
const MAX_NAME: usize = libc::IFNAMSIZ - 1;

/// An open TUN device in IFF_TUN | IFF_NO_PI mode: each read returns one IP packet the kernel
/// routed out of the device, each write hands one IP packet to the kernel as if it had arrived on
/// it. The device disappears (with its address and routes) when this is dropped.
#[derive(Debug)]
pub struct TunDevice {
    file: File,
    name: String,
}

impl TunDevice {
    /// Creates the device `name` (a name with `%d`, like `tern%d`, lets the kernel pick the number).
    pub fn create(name: &str) -> io::Result<Self> {
        if name.is_empty() || name.len() > MAX_NAME || name.contains(['/', ' ']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {name:?}: 1 to {MAX_NAME} bytes, no '/' or spaces"),
            ));
        }
        let file = OpenOptions::new().read(true).write(true).open("/dev/net/tun").map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open /dev/net/tun (is the tun module there?): {e}"),
            )
        })?;
        let name = attach(&file, name).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("TUNSETIFF {name:?} failed (needs CAP_NET_ADMIN in this namespace): {e}"),
            )
        })?;
        Ok(Self { file, name })
    }

    /// The interface name the kernel gave the device.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the device `host/prefix`, brings it and `lo` up, and turns off its IPv6 (so the
    /// kernel does not send router solicitations into the reflector).
    pub fn configure(&self, host: Ipv4Addr, prefix: u8) -> io::Result<()> {
        ip(&["link", "set", "lo", "up"])?;
        ip(&["addr", "add", &format!("{host}/{prefix}"), "dev", &self.name])?;
        // Best effort: a kernel without IPv6 has no such file, and then nothing to silence.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", self.name), "1");
        ip(&["link", "set", &self.name, "up"])
    }

    /// Waits up to `timeout` for a packet; `Ok(None)` when none came.
    pub fn recv_timeout(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        if !readable(&self.file, timeout)? {
            return Ok(None);
        }
        (&self.file).read(buf).map(Some)
    }

    /// Hands one IP packet to the kernel as if it had arrived on the device.
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        (&self.file).write(packet)
    }
}

/// Refuses to go on unless this looks like a network namespace made for the purpose (`unshare
/// -n`): the reflector adds a device, an address and a route, which must never land on the
/// machine's own network. The test: no interface is up besides `lo` and TUN devices (a fresh
/// namespace has nothing else; the machine's has its Ethernet), and when PID 1's namespace is
/// readable, this is not it. (Reading it alone is not enough: in some sandboxes even root may not
/// read PID 1's namespace link.)
pub fn ensure_private_netns() -> io::Result<()> {
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing to create a TUN link here: {why}; run it inside a fresh network \
                 namespace (`unshare -n` as root, `unshare -rn` otherwise)"
            ),
        ))
    };
    let ours = std::fs::read_link("/proc/self/ns/net")?;
    if std::fs::read_link("/proc/1/ns/net").is_ok_and(|init| init == ours) {
        return refuse(format!("this is PID 1's network namespace ({})", ours.display()));
    }
    let up = ip_output(&["-o", "link", "show", "up"])?;
    let foreign = foreign_interfaces(&up);
    if !foreign.is_empty() {
        return refuse(format!(
            "interfaces other than lo and TUN devices are up ({}), so this namespace reaches a \
             network",
            foreign.join(", ")
        ));
    }
    Ok(())
}

/// The names of interfaces in `ip -o link show` output that are neither loopback nor TUN
/// (`link/none`) devices.
fn foreign_interfaces(ip_link: &str) -> Vec<String> {
    ip_link
        .lines()
        .filter(|line| !line.contains("link/loopback") && !line.contains("link/none"))
        .filter_map(|line| line.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .collect()
}

fn ip(args: &[&str]) -> io::Result<()> {
    ip_output(args).map(drop)
}

/// Runs `ip ARGS`; its standard output, or an error with its standard error.
fn ip_output(args: &[&str]) -> io::Result<String> {
    let output = Command::new("ip").args(args).output().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot run `ip` (install iproute2): {e}"))
    })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(io::Error::other(format!(
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// Binds the open `/dev/net/tun` file to a new TUN interface; returns the interface's name.
#[allow(unsafe_code)]
fn attach(file: &File, name: &str) -> io::Result<String> {
    // SAFETY: `ifreq` is plain data (a name array and a union of integers, addresses and a
    // pointer), for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq` through the pointer, which points at
    // a live, initialized `ifreq` for the duration of the call; the fd is open (borrowed from
    // `file`).
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = req.ifr_name.iter().position(|&c| c == 0).unwrap_or(req.ifr_name.len());
    Ok(req.ifr_name[..len].iter().map(|&c| c as u8 as char).collect())
}

/// Whether `file` has data to read within `timeout` (a read after `true` does not block).
#[allow(unsafe_code)]
fn readable(file: &File, timeout: Duration) -> io::Result<bool> {
    let mut fd = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid `pollfd` for the duration of the call, and the count says one.
    let n = unsafe { libc::poll(&mut fd, 1, millis) };
    match n {
        0 => Ok(false),
        n if n > 0 => Ok(true),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lo_and_tun_devices_count_as_a_private_namespace() {
        // `ip -o link show up` on a machine's own namespace, and in a namespace of our own.
        let machine = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN \\    \
                       link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n\
                       4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1400 qdisc pfifo_fast \
                       state UP \\    link/ether 02:fc:00:00:00:01 brd ff:ff:ff:ff:ff:ff\n\
                       5: veth1@if6: <BROADCAST,UP> mtu 1500 \\    link/ether 02:fc:00:00:00:02\n";
        assert_eq!(foreign_interfaces(machine), ["eth0", "veth1"]);
        let private = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 \\    link/loopback 00:00:00:00:00:00\n\
                       2: tern0: <NO-CARRIER,POINTOPOINT,MULTICAST,NOARP,UP> mtu 1500 \\    \
                       link/none \n";
        assert!(foreign_interfaces(private).is_empty());
        assert!(foreign_interfaces("").is_empty());
    }
}
