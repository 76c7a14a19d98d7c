package ledger

import (
	"context"
	"errors"
)

// ErrorClass says what a caller can do about an error a store returned.
type ErrorClass int

const (
	// Fatal: trying again will not help (a refused request, a malformed
	// statement, a schema that is not migrated, a broken file).
	Fatal ErrorClass = iota
	// Transient: the database could not be reached or was going away
	// (a dropped connection, a server shutting down or not accepting
	// connections yet, a deadline); the call may be tried again later.
	Transient
	// Conflict: a concurrent transaction held what this one needed (a
	// serialization failure, a deadlock, a lock that stayed busy); the
	// call changed nothing and may be tried again at once.
	Conflict
)

func (c ErrorClass) String() string {
	switch c {
	case Transient:
		return "transient"
	case Conflict:
		return "conflict"
	}
	return "fatal"
}

// DriverError is a database driver's error as it leaves a store, with its
// class. Its text is the driver's; errors.Is and errors.As see through it.
type DriverError struct {
	Class ErrorClass
	Err   error
}

func (e *DriverError) Error() string { return e.Err.Error() }
func (e *DriverError) Unwrap() error { return e.Err }

// ErrorClassOf returns the class of an error a store returned: a
// DriverError's own, Transient for a deadline that ran out, and Fatal for
// everything else, this package's errors included.
func ErrorClassOf(err error) ErrorClass {
	var de *DriverError
	switch {
	case errors.As(err, &de):
		return de.Class
	case errors.Is(err, context.DeadlineExceeded):
		return Transient
	}
	return Fatal
}
