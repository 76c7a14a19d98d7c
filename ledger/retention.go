package ledger
