"""The account area: profile, linked sign-in methods, sessions, deleting the account."""
