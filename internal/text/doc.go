// Package text shortens outside text (provider error bodies, failure
// reasons) before it is stored or shown, and makes it safe to show on a
// terminal (Visible).
package text
