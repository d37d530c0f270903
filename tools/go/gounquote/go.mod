module github.com/obs-iac/tools/gounquote

go 1.26.0
