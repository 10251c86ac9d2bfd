package sandbox

import "golang.org/x/sys/unix"

var filterArch = seccompArchInfo{ok: true, audit: unix.AUDIT_ARCH_AARCH64, socket: unix.SYS_SOCKET, ioUringSetup: unix.SYS_IO_URING_SETUP}
