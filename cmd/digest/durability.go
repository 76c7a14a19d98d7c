package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weeklydigest/digest/ledger"
)

// checkDurability reads the ledger's durability settings and logs them. A
// setting that can lose a committed receipt in a crash of the database is
// a configuration error (exit 2): a digest recorded as sent could be sent
// again after the crash, and no retry fixes the setting.
func checkDurability(ctx context.Context, store ledger.Store, log *slog.Logger) error {
	ss, err := store.Durability(ctx)
	if err != nil {
		return fmt.Errorf("ledger durability check: %w", err)
	}
	if err := ss.Err(); err != nil {
		log.Error("ledger durability check failed: refusing to send", "settings", ss.String(), "err", err)
		return usagef("%v", err)
	}
	log.Info("ledger durability check passed", "settings", ss.String())
	return nil
}

// ledgerCheck is the durability check's line in a dry run's summary.
func ledgerCheck(err error) checkResult {
	if err != nil {
		return checkResult{name: "ledger", result: "failed: " + err.Error()}
	}
	return checkResult{name: "ledger", result: "ok"}
}
