package main

import "context"

func cmdRun(context.Context, *Env, []string) error      { return usagef("not built yet") }
func cmdMigrate(context.Context, *Env, []string) error  { return usagef("not built yet") }
func cmdStatus(context.Context, *Env, []string) error   { return usagef("not built yet") }
func cmdReview(context.Context, *Env, []string) error   { return usagef("not built yet") }
func cmdPrune(context.Context, *Env, []string) error    { return usagef("not built yet") }
func cmdSchedule(context.Context, *Env, []string) error { return usagef("not built yet") }
func cmdSeed(context.Context, *Env, []string) error     { return usagef("not built yet") }
