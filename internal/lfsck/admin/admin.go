// Package admin is the client side of `nacre lfsck` (lfsck.go), `nacre
// fault` (fault.go) and `nacre mdt backup|restore` (backup.go): it finds
// the targets through the MGS, calls their Lfsck, Fault and OSS services
// over one connection that follows MDT failovers (conn.go), and formats
// what they answer. Its commands run with the CLI's environment
// (cli.Env); Conn (program.go) drives the checkers from a program. The
// checker itself is internal/lfsck (it runs in the MDS).
package admin
