// Package texttest holds the check, shared by the commands' tests, that
// printed output carries nothing a terminal would act on.
package texttest
