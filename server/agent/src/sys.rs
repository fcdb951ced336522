//! The few system calls std does not offer, behind safe wrappers, for the
//! supervisor of a resident sandbox: waiting on a job's pipes and on the job
//! itself at once (`poll`, `pidfd_open`), and adopting the job's orphans
//! (`PR_SET_CHILD_SUBREAPER`), so that one `waitpid` tells whether the job
//! left a process behind. Each call takes plain integers or pointers to
//! memory it borrows for the call only.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Makes this process the reaper of its descendants' orphans: a process
/// whose parent dies is re-parented to this one rather than to the pid
/// namespace's init, so every live process started from here is a
/// descendant of one of this process's live children.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and no pointer.
    let done = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A file descriptor that turns readable when the process `pid` (a child
/// not yet reaped) exits.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(io::Error::other)?;
    // SAFETY: the kernel just returned `fd`, open and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits until one of `fds` can be read without blocking (data, end of
/// file, hang-up or error: a read tells which), or `timeout` passed (`None`:
/// no limit). Marks in `ready` the ones that can; returns how many.
/// Interrupted by a signal, it returns 0 with none marked.
pub fn poll_readable(
    fds: &[BorrowedFd<'_>],
    timeout: Option<Duration>,
    ready: &mut [bool],
) -> io::Result<usize> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| {
        // Rounded up, so a short wait is not a busy loop.
        libc::c_int::try_from(t.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX)
    });
    let nfds = libc::nfds_t::try_from(polled.len()).map_err(io::Error::other)?;
    // SAFETY: `polled` is a live array of `nfds` pollfd structs, which poll
    // reads and writes only during the call.
    let n = unsafe { libc::poll(polled.as_mut_ptr(), nfds, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    let mut count = 0;
    for (slot, p) in ready.iter_mut().zip(&polled) {
        *slot = p.revents != 0;
        count += usize::from(*slot);
    }
    Ok(count)
}

/// Reaps every child that has exited (orphans adopted as the subreaper
/// included); whether a child is still alive.
pub fn reap_children() -> io::Result<bool> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a live c_int that waitpid writes during the call.
        let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
        match pid {
            0 => return Ok(true),
            p if p > 0 => {}
            _ => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ECHILD) => return Ok(false),
                    Some(libc::EINTR) => {}
                    _ => return Err(e),
                }
            }
        }
    }
}

/// Sends SIGKILL to the process `pid`.
pub fn kill(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: kill takes two integers and no pointer.
    if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes every extended attribute of `path` (not following a link) that
/// a process could have set on it: POSIX ACLs (`system.posix_acl_*`) and
/// the `user.` and `trusted.` namespaces. `security.` labels are the
/// system's, and stay.
pub fn remove_xattrs(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let mut names = vec![0u8; 4096];
    let len = loop {
        // SAFETY: `c_path` is NUL-terminated and `names` is writable for the
        // length passed; the kernel writes at most that many bytes.
        let n =
            unsafe { libc::llistxattr(c_path.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) if names.len() < 1 << 20 => names.resize(names.len() * 4, 0),
            Some(libc::ENOTSUP) => return Ok(()),
            _ => return Err(e),
        }
    };
    for name in names[..len].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        if name.starts_with(b"security.") {
            continue;
        }
        let c_name = std::ffi::CString::new(name).map_err(io::Error::other)?;
        // SAFETY: both strings are NUL-terminated and live across the call.
        if unsafe { libc::lremovexattr(c_path.as_ptr(), c_name.as_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENODATA) {
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::process::{Command, Stdio};

    #[test]
    fn poll_sees_data_and_a_process_exit() {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let exit = pidfd_open(child.id()).unwrap();
        let mut ready = [false; 2];
        let n = poll_readable(
            &[out.as_fd(), exit.as_fd()],
            Some(Duration::from_millis(20)),
            &mut ready,
        )
        .unwrap();
        assert_eq!((n, ready), (0, [false, false]), "nothing yet");
        kill(child.id()).unwrap();
        // The pipe's end and the exit come apart: the exit alone is awaited.
        let n = poll_readable(&[exit.as_fd()], None, &mut ready[..1]).unwrap();
        assert_eq!((n, ready[0]), (1, true), "the exit wakes the poll");
        assert!(child.wait().unwrap().code().is_none(), "killed");

        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"x").unwrap();
        let n = poll_readable(&[reader.as_fd()], Some(Duration::ZERO), &mut ready[..1]).unwrap();
        assert_eq!((n, ready[0]), (1, true));
    }

    #[test]
    fn pidfds_of_strangers_are_refused() {
        assert!(pidfd_open(u32::MAX).is_err());
        assert!(kill(u32::MAX).is_err());
    }
}
