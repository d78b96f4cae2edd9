package unpack_test

import "syscall"

type syscallStat = syscall.Stat_t
