// Package text shortens outside text (provider error bodies, failure
// reasons) before it is stored or shown.
package text
