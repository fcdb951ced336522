//! What the service and the agent both know of the host's network.

use std::net::Ipv4Addr;

/// Where `ip` (iproute2) is looked for when it is not on `PATH`: the
/// service's `PATH` may lack the sbin directories.
pub const IP_FALLBACKS: [&str; 3] = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"];

/// The host's own IPv4 addresses outside `127.0.0.0/8` in a
/// `/proc/net/fib_trie` listing: the address of each `/32 host LOCAL` entry,
/// which follows the `|-- ADDR` line it belongs to. Where services bound to
/// all addresses listen.
pub fn local_ipv4_addresses(fib_trie: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in fib_trie.lines() {
        let line = line.trim_start();
        if let Some(addr) = line
            .strip_prefix("|-- ")
            .or_else(|| line.strip_prefix("+-- "))
        {
            last = addr.split(['/', ' ']).next().and_then(|a| a.parse().ok());
        } else if line.starts_with("/32 host LOCAL")
            && let Some(addr) = last
            && !addr.is_loopback()
            && !found.contains(&addr)
        {
            found.push(addr);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_s_own_addresses_are_found_in_the_fib_trie() {
        let trie = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
     |-- 172.17.0.1
        /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     +-- 192.0.2.0/24 2 0 2
           |-- 192.0.2.2
              /32 host LOCAL
";
        assert_eq!(
            local_ipv4_addresses(trie),
            [Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(172, 17, 0, 1)]
        );
        assert!(local_ipv4_addresses("").is_empty());
    }
}
